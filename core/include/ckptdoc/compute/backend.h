#pragma once
// The hot loops of analysis and repair behind one interface, with a CPU implementation (threads,
// vectorisable loops) and a CUDA one that must give the same answers: identical histogram counts and
// conversions, sums within floating-point tolerance.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ckptdoc/compute/statistics.h"
#include "ckptdoc/dtype.h"

namespace ckptdoc {

enum class DeviceKind : uint8_t { Auto, Cpu, Cuda };
DeviceKind parse_device(const std::string& s);  // "auto" | "cpu" | "cuda"; throws ckptdoc::Error otherwise
std::string device_name(DeviceKind k);

// divergence(lp, fp32) together with value_stats of both sides.
struct FragmentStats {
  DivergenceStats divergence;
  ValueStats lp;
  ValueStats fp32;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string description() const = 0;  // e.g. "CPU (2 threads)", "CUDA: NVIDIA H200 (sm_90)"

  // Statistics of n elements of `dtype` (F32, F16, BF16, F64 at least) at `data` (host memory).
  virtual ValueStats value_stats(const void* data, DType dtype, size_t n) = 0;
  // lp (F16 or BF16, or F32 when training ran in fp32) vs fp32 master, element-wise, n elements each.
  virtual DivergenceStats divergence(const void* lp, DType lp_dtype, const float* fp32, size_t n) = 0;
  // divergence(lp, fp32, n), value_stats(lp, lp_dtype, n) and value_stats(fp32, F32, n) in one call, which a
  // backend may answer in one pass over the data; the results are those of the three calls. lp_dtype as for
  // divergence().
  virtual FragmentStats fragment_stats(const void* lp, DType lp_dtype, const float* fp32, size_t n) {
    FragmentStats s;
    s.divergence = divergence(lp, lp_dtype, fp32, n);
    s.lp = value_stats(lp, lp_dtype, n);
    s.fp32 = value_stats(fp32, DType::F32, n);
    return s;
  }
  // out[i] = float(lp[i]) exactly.
  virtual void upcast(const void* lp, DType lp_dtype, float* out, size_t n) = 0;
  // out[i] = round_to_nearest_even(in[i]) in `lp_dtype` (F16/BF16; F32 copies).
  virtual void downcast(const float* in, DType lp_dtype, void* out, size_t n) = 0;
};

// Picks a backend. Auto: CUDA when built with CUDA and a device is present, else CPU (and `note` says why).
// The CUDA backend runs on this process's first device (devices_for_process under MPI, else device 0).
// Cuda with no usable device throws ckptdoc::Error with the CUDA runtime's reason.
std::unique_ptr<Backend> make_backend(DeviceKind kind, std::string* note = nullptr);
// Code path of the CPU backend: Best picks the AVX2/F16C/FMA kernels when the processor has them, Scalar
// keeps to the portable code (same counts and histograms; sums may differ in the last bits).
enum class CpuPath : uint8_t { Best, Scalar };
std::unique_ptr<Backend> make_cpu_backend(unsigned threads = 0,  // 0 = hardware concurrency
                                          CpuPath path = CpuPath::Best);
bool cpu_simd_available();  // whether CpuPath::Best runs the AVX2 kernels on this machine
// True when this build has CUDA support and at least one device is usable; `reason` says why not.
bool cuda_available(std::string* reason = nullptr);
int cuda_device_count();  // visible CUDA devices; 0 without CUDA or without a usable device
// A CUDA backend on visible device `device`; throws ckptdoc::Error when that device is unusable.
std::unique_ptr<Backend> make_cuda_backend(int device);
// The devices a process drives when `local_size` processes share a node with `count` GPUs: a process per
// GPU gets its own; fewer processes than GPUs split them round robin (process i gets i, i + local_size,
// ...); more processes than GPUs share them (process i gets i % count). Empty when count is 0.
std::vector<int> devices_for_process(int local_rank, int local_size, int count);

}  // namespace ckptdoc
