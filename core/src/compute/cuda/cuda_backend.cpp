// CUDA backend: host data goes through pinned staging buffers in tiles; two streams alternate so that the
// copy of tile k overlaps the kernel of tile k-1. Per-block partial sums come back per tile and are reduced
// on the host in tile and block order; histograms are exact integer atomics on the device.
#include "compute/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ckptdoc/error.h"
#include "compute/cuda/kernels.h"
#include "compute/element_ops.h"

namespace ckptdoc::cuda {
namespace {

std::string error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear a non-sticky error so later calls start clean
    throw Error(ErrorKind::Device, "", std::string("CUDA ") + what, "failed: " + error_text(e));
  }
}

// (ckptdoc_cuda links before ckptdoc_core: no calls into core's .cpp files from here, only headers.)
constexpr size_t kTile = size_t{1} << 22;  // elements per staged tile (multiple of 8: aligned vector loads)
constexpr size_t kInBytes = 8;             // largest input bytes per element (fp32 lp + fp32 master, or f64)
constexpr size_t kOutBytes = 4;

// Host-side totals of the per-block partials, added in tile and block order (deterministic for a grid).
struct ValueTotals {
  ValueStats s;
  std::array<unsigned long long, 6> cls{};
  double mn = std::numeric_limits<double>::infinity(), mx = -std::numeric_limits<double>::infinity();

  void add(const ValPartial* p, int blocks, size_t m) {
    for (int i = 0; i < blocks; ++i) {
      for (int c = 1; c < 6; ++c) cls[static_cast<size_t>(c)] += p[i].cls[c];
      s.negatives += p[i].negatives;
      s.sum += p[i].sum;
      s.sum_sq += p[i].sum_sq;
      mn = std::min(mn, p[i].min);
      mx = std::max(mx, p[i].max);
    }
    s.count += m;
  }
  // `hist`: this statistic's value_hist_size() slots, copied back from the device.
  ValueStats finish(const unsigned long long* hist) {
    s.subnormals = cls[compute::kSubnormal];
    s.zeros = cls[compute::kZero];
    s.nan = cls[compute::kNan];
    s.pos_inf = cls[compute::kPosInf];
    s.neg_inf = cls[compute::kNegInf];
    if (s.finite_count() > 0) {
      s.min = mn;
      s.max = mx;
    }
    slots_into(hist, s.log_abs);
    slots_into(hist + compute::kLogSlots, s.log_abs_negative);
    return s;
  }
  static void slots_into(const unsigned long long* h, LogHistogram& out) {
    std::array<uint64_t, compute::kLogBins> bins{};
    for (int i = 0; i < compute::kLogBins; ++i) bins[static_cast<size_t>(i)] = h[i];
    out.counts.assign(bins);
    out.underflow = h[compute::kSlotUnderflow];
    out.overflow = h[compute::kSlotOverflow];
    out.zeros = h[compute::kSlotZero];
    out.nonfinite = h[compute::kSlotNonfinite];
  }
};

struct DivergenceTotals {
  DivergenceStats s;

  void add(const DivPartial* p, int blocks, size_t m) {
    for (int i = 0; i < blocks; ++i) {
      s.exact += p[i].exact;
      s.nonfinite += p[i].nonfinite;
      s.max_abs = std::max(s.max_abs, p[i].max_abs);
      s.sum_abs += p[i].sum_abs;
      s.sum_sq_diff += p[i].sum_sq_diff;
      s.sum_sq_lp += p[i].sum_sq_lp;
      s.sum_sq_fp32 += p[i].sum_sq_fp32;
    }
    s.count += m;
  }
  // `hist`: divergence_hist_size() slots (|diff| log slots, then the ULP buckets).
  DivergenceStats finish(const unsigned long long* hist) {
    ValueTotals::slots_into(hist, s.log_abs_diff);
    std::array<uint64_t, UlpHistogram::kBuckets> ulp{};
    for (int i = 0; i < UlpHistogram::kBuckets; ++i)
      ulp[static_cast<size_t>(i)] = hist[static_cast<size_t>(compute::kLogSlots + i)];
    s.ulp.counts.assign(ulp);
    return s;
  }
};

int lp_kind(DType t, const char* what) {
  switch (t) {
    case DType::F16:
      return 0;
    case DType::BF16:
      return 1;
    case DType::F32:
      return 2;
    default:
      throw Error(ErrorKind::Unsupported, "", what,
                  "unsupported lp dtype " + std::to_string(static_cast<int>(t)));
  }
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : dev_(device) {
    check(cudaSetDevice(dev_), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, dev_), "cudaGetDeviceProperties");
    name_ = prop.name;
    sm_ = std::to_string(prop.major) + std::to_string(prop.minor);
    sms_ = prop.multiProcessorCount;
    blocks_ = std::max(1, sms_ * 8);
    for (auto& s : streams_) check(cudaStreamCreate(&s), "cudaStreamCreate");
  }
  ~CudaBackend() override {
    (void)cudaSetDevice(dev_);
    for (auto s : streams_)
      if (s) (void)cudaStreamSynchronize(s);
    for (int i = 0; i < 2; ++i) {
      if (h_in_[i]) (void)cudaFreeHost(h_in_[i]);
      if (h_out_[i]) (void)cudaFreeHost(h_out_[i]);
      if (h_part_[i]) (void)cudaFreeHost(h_part_[i]);
      if (d_in_[i]) (void)cudaFree(d_in_[i]);
      if (d_out_[i]) (void)cudaFree(d_out_[i]);
      if (d_part_[i]) (void)cudaFree(d_part_[i]);
    }
    if (d_hist_) (void)cudaFree(d_hist_);
    for (auto s : streams_)
      if (s) (void)cudaStreamDestroy(s);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  DeviceKind kind() const override { return DeviceKind::Cuda; }
  std::string description() const override { return "CUDA: " + name_ + " (sm_" + sm_ + ")"; }

  ValueStats value_stats(const void* data, DType dtype, size_t n) override {
    int k;
    switch (dtype) {
      case DType::F16:
        k = 0;
        break;
      case DType::BF16:
        k = 1;
        break;
      case DType::F32:
        k = 2;
        break;
      case DType::F64:
        k = 3;
        break;
      default:
        throw Error(ErrorKind::Unsupported, "", "value statistics",
                    "unsupported dtype " + std::to_string(static_cast<int>(dtype)));
    }
    prepare();
    const size_t es = k == 3 ? 8 : (k == 2 ? 4 : 2);
    clear_hist(value_hist_size());
    ValueTotals t;
    const auto* src = static_cast<const unsigned char*>(data);
    pipeline(
        n,
        [&](int slot, size_t b, size_t m, cudaStream_t st) {
          std::memcpy(h_in_[slot], src + b * es, m * es);
          check(cudaMemcpyAsync(d_in_[slot], h_in_[slot], m * es, cudaMemcpyHostToDevice, st),
                "cudaMemcpyAsync");
          check(
              launch_values(d_in_[slot], k, m, static_cast<ValPartial*>(d_part_[slot]), blocks_, d_hist_, st),
              "value kernel launch");
          check(
              cudaMemcpyAsync(h_part_[slot], d_part_[slot], sizeof(ValPartial) * static_cast<size_t>(blocks_),
                              cudaMemcpyDeviceToHost, st),
              "cudaMemcpyAsync");
        },
        [&](int slot, size_t, size_t m) {
          t.add(static_cast<const ValPartial*>(h_part_[slot]), blocks_, m);
        });
    return t.finish(hist(value_hist_size()).data());
  }

  DivergenceStats divergence(const void* lp, DType lp_dtype, const float* fp32, size_t n) override {
    const int k = lp_kind(lp_dtype, "divergence");
    prepare();
    const size_t es = k == 2 ? 4 : 2;
    clear_hist(divergence_hist_size());
    DivergenceTotals t;
    pipeline(
        n,
        [&](int slot, size_t b, size_t m, cudaStream_t st) {
          const float* master = stage_pair(slot, lp, es, fp32, b, m, st);
          check(launch_divergence(d_in_[slot], k, master, m, static_cast<DivPartial*>(d_part_[slot]), blocks_,
                                  d_hist_, st),
                "divergence kernel launch");
          check(
              cudaMemcpyAsync(h_part_[slot], d_part_[slot], sizeof(DivPartial) * static_cast<size_t>(blocks_),
                              cudaMemcpyDeviceToHost, st),
              "cudaMemcpyAsync");
        },
        [&](int slot, size_t, size_t m) {
          t.add(static_cast<const DivPartial*>(h_part_[slot]), blocks_, m);
        });
    return t.finish(hist(divergence_hist_size()).data());
  }

  // Divergence and both sides' statistics from one upload of each tile: three kernels over the same device
  // buffers, each with its own partials and histogram slots, so PCIe carries every byte once.
  FragmentStats fragment_stats(const void* lp, DType lp_dtype, const float* fp32, size_t n) override {
    const int k = lp_kind(lp_dtype, "fragment statistics");
    prepare();
    const size_t es = k == 2 ? 4 : 2;
    const int dh = divergence_hist_size(), vh = value_hist_size();
    clear_hist(dh + 2 * vh);
    unsigned long long* hist_lp = d_hist_ + dh;
    unsigned long long* hist_fp32 = hist_lp + vh;
    const size_t div_bytes = sizeof(DivPartial) * static_cast<size_t>(blocks_);
    const size_t val_bytes = sizeof(ValPartial) * static_cast<size_t>(blocks_);
    DivergenceTotals dt;
    ValueTotals lt, ft;
    pipeline(
        n,
        [&](int slot, size_t b, size_t m, cudaStream_t st) {
          const float* master = stage_pair(slot, lp, es, fp32, b, m, st);
          auto* part = static_cast<unsigned char*>(d_part_[slot]);
          auto* div_part = reinterpret_cast<DivPartial*>(part);
          auto* lp_part = reinterpret_cast<ValPartial*>(part + div_bytes);
          auto* fp32_part = reinterpret_cast<ValPartial*>(part + div_bytes + val_bytes);
          check(launch_divergence(d_in_[slot], k, master, m, div_part, blocks_, d_hist_, st),
                "divergence kernel launch");
          check(launch_values(d_in_[slot], k, m, lp_part, blocks_, hist_lp, st), "value kernel launch");
          check(launch_values(master, 2, m, fp32_part, blocks_, hist_fp32, st), "value kernel launch");
          check(cudaMemcpyAsync(h_part_[slot], part, div_bytes + 2 * val_bytes, cudaMemcpyDeviceToHost, st),
                "cudaMemcpyAsync");
        },
        [&](int slot, size_t, size_t m) {
          const auto* part = static_cast<const unsigned char*>(h_part_[slot]);
          dt.add(reinterpret_cast<const DivPartial*>(part), blocks_, m);
          lt.add(reinterpret_cast<const ValPartial*>(part + div_bytes), blocks_, m);
          ft.add(reinterpret_cast<const ValPartial*>(part + div_bytes + val_bytes), blocks_, m);
        });
    const std::vector<unsigned long long> h = hist(dh + 2 * vh);
    FragmentStats out;
    out.divergence = dt.finish(h.data());
    out.lp = lt.finish(h.data() + dh);
    out.fp32 = ft.finish(h.data() + dh + vh);
    return out;
  }

  void upcast(const void* lp, DType lp_dtype, float* out, size_t n) override {
    if (lp_dtype == DType::F32) {
      if (lp != out) std::memmove(out, lp, n * 4);
      return;
    }
    if (lp_dtype != DType::F16 && lp_dtype != DType::BF16)
      throw Error(ErrorKind::Unsupported, "", "upcast",
                  "unsupported lp dtype " + std::to_string(static_cast<int>(lp_dtype)));
    const bool bf = lp_dtype == DType::BF16;
    const auto* src = static_cast<const uint16_t*>(lp);
    prepare();
    pipeline(
        n,
        [&](int slot, size_t b, size_t m, cudaStream_t st) {
          std::memcpy(h_in_[slot], src + b, m * 2);
          check(cudaMemcpyAsync(d_in_[slot], h_in_[slot], m * 2, cudaMemcpyHostToDevice, st),
                "cudaMemcpyAsync");
          check(launch_upcast(static_cast<const uint16_t*>(d_in_[slot]), bf,
                              static_cast<float*>(d_out_[slot]), m, st),
                "upcast kernel launch");
          check(cudaMemcpyAsync(h_out_[slot], d_out_[slot], m * 4, cudaMemcpyDeviceToHost, st),
                "cudaMemcpyAsync");
        },
        [&](int slot, size_t b, size_t m) { std::memcpy(out + b, h_out_[slot], m * 4); });
  }

  void downcast(const float* in, DType lp_dtype, void* out, size_t n) override {
    if (lp_dtype == DType::F32) {
      if (in != out) std::memmove(out, in, n * 4);
      return;
    }
    if (lp_dtype != DType::F16 && lp_dtype != DType::BF16)
      throw Error(ErrorKind::Unsupported, "", "downcast",
                  "unsupported lp dtype " + std::to_string(static_cast<int>(lp_dtype)));
    const bool bf = lp_dtype == DType::BF16;
    auto* dst = static_cast<uint16_t*>(out);
    prepare();
    pipeline(
        n,
        [&](int slot, size_t b, size_t m, cudaStream_t st) {
          std::memcpy(h_in_[slot], in + b, m * 4);
          check(cudaMemcpyAsync(d_in_[slot], h_in_[slot], m * 4, cudaMemcpyHostToDevice, st),
                "cudaMemcpyAsync");
          check(launch_downcast(static_cast<const float*>(d_in_[slot]), bf,
                                static_cast<uint16_t*>(d_out_[slot]), m, st),
                "downcast kernel launch");
          check(cudaMemcpyAsync(h_out_[slot], d_out_[slot], m * 2, cudaMemcpyDeviceToHost, st),
                "cudaMemcpyAsync");
        },
        [&](int slot, size_t b, size_t m) { std::memcpy(dst + b, h_out_[slot], m * 2); });
  }

 private:
  // Zeroes the first `slots` histogram slots before a pass.
  void clear_hist(int slots) {
    check(cudaMemsetAsync(d_hist_, 0, sizeof(unsigned long long) * static_cast<size_t>(slots), streams_[0]),
          "cudaMemsetAsync");
    check(cudaStreamSynchronize(streams_[0]), "cudaStreamSynchronize");
  }
  std::vector<unsigned long long> hist(int slots) {
    std::vector<unsigned long long> h(static_cast<size_t>(slots));
    check(cudaMemcpy(h.data(), d_hist_, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
    return h;
  }
  // Stages tile [b, b + m) of lp (es bytes each) and its fp32 masters into slot's buffers and uploads both;
  // returns where the masters are on the device (after the lp block, 16-byte aligned).
  const float* stage_pair(int slot, const void* lp, size_t es, const float* fp32, size_t b, size_t m,
                          cudaStream_t st) {
    const size_t master_off = kTile * 4;
    auto* hin = static_cast<unsigned char*>(h_in_[slot]);
    auto* din = static_cast<unsigned char*>(d_in_[slot]);
    std::memcpy(hin, static_cast<const unsigned char*>(lp) + b * es, m * es);
    std::memcpy(hin + master_off, fp32 + b, m * 4);
    check(cudaMemcpyAsync(din, hin, m * es, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync");
    check(cudaMemcpyAsync(din + master_off, hin + master_off, m * 4, cudaMemcpyHostToDevice, st),
          "cudaMemcpyAsync");
    return reinterpret_cast<const float*>(din + master_off);
  }

  // Allocates the staging and device buffers once.
  void prepare() {
    check(cudaSetDevice(dev_), "cudaSetDevice");
    if (d_hist_) return;
    const size_t part =
        (sizeof(DivPartial) + 2 * sizeof(ValPartial)) * static_cast<size_t>(blocks_);  // fused pass
    for (int i = 0; i < 2; ++i) {
      check(cudaMallocHost(&h_in_[i], kTile * kInBytes), "cudaMallocHost");
      check(cudaMallocHost(&h_out_[i], kTile * kOutBytes), "cudaMallocHost");
      check(cudaMallocHost(&h_part_[i], part), "cudaMallocHost");
      check(cudaMalloc(&d_in_[i], kTile * kInBytes), "cudaMalloc");
      check(cudaMalloc(&d_out_[i], kTile * kOutBytes), "cudaMalloc");
      check(cudaMalloc(&d_part_[i], part), "cudaMalloc");
    }
    const size_t hist = static_cast<size_t>(divergence_hist_size() + 2 * value_hist_size());
    check(cudaMalloc(reinterpret_cast<void**>(&d_hist_), hist * sizeof(unsigned long long)), "cudaMalloc");
  }

  // Tiles [0, n) over the two streams. issue(slot, begin, count, stream) stages and enqueues a tile;
  // finish(slot, begin, count) runs after that tile's stream is synchronised, in tile order.
  template <class Issue, class Finish>
  void pipeline(size_t n, Issue&& issue, Finish&& finish) {
    struct Pending {
      bool active = false;
      size_t begin = 0, count = 0;
    };
    std::array<Pending, 2> pending{};
    auto drain = [&](int slot) {
      check(cudaStreamSynchronize(streams_[slot]), "cudaStreamSynchronize");
      if (pending[static_cast<size_t>(slot)].active) {
        auto& p = pending[static_cast<size_t>(slot)];
        finish(slot, p.begin, p.count);
        p.active = false;
      }
    };
    size_t tile = 0;
    for (size_t b = 0; b < n; b += kTile, ++tile) {
      const int slot = static_cast<int>(tile % 2);
      drain(slot);  // tile-2 used this slot: its buffers are free again once it is finished
      const size_t m = std::min(kTile, n - b);
      issue(slot, b, m, streams_[slot]);
      pending[static_cast<size_t>(slot)] = {true, b, m};
    }
    if (tile >= 2) drain(static_cast<int>(tile % 2));  // the older of the last two first
    drain(static_cast<int>((tile + 1) % 2));
  }

  int dev_;
  std::string name_, sm_;
  int sms_ = 0, blocks_ = 1;
  std::array<cudaStream_t, 2> streams_{};
  std::array<void*, 2> h_in_{}, h_out_{}, h_part_{}, d_in_{}, d_out_{}, d_part_{};
  unsigned long long* d_hist_ = nullptr;
};

}  // namespace

bool probe(std::string* reason) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (reason) *reason = error_text(e);
    return false;
  }
  if (count <= 0) {
    if (reason) *reason = "no CUDA devices";
    return false;
  }
  return true;
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

std::unique_ptr<Backend> make_backend(int device) {
  return std::make_unique<CudaBackend>(device);
}

}  // namespace ckptdoc::cuda
