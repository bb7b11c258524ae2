// CUDA bandwidth table: device copy bandwidth (cudaMemcpy D2D) as the ceiling, each kernel's bandwidth and
// its fraction of it, and CPU vs GPU time on the same divergence input. Exits 0 with a note without a GPU.
// usage: bench_cuda [elements (default 256Mi)] [repeats (default 5)]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ckptdoc/compute/backend.h"
#include "compute/cuda/kernels.h"

using namespace ckptdoc;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
    std::exit(1);
  }
}

template <class T>
void dmalloc(T** p, size_t bytes) {
  check(cudaMalloc(reinterpret_cast<void**>(p), bytes), "cudaMalloc");
}

template <class F>
double best_ms(int repeats, F&& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  f();  // warm-up
  check(cudaDeviceSynchronize(), "warm-up");
  float best = 1e30f;
  for (int r = 0; r < repeats; ++r) {
    check(cudaEventRecord(a), "cudaEventRecord");
    f();
    check(cudaEventRecord(b), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    best = std::min(best, ms);
  }
  (void)cudaEventDestroy(a);
  (void)cudaEventDestroy(b);
  return best;
}

template <class F>
double host_best_ms(int repeats, F&& f) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string reason;
  if (!cuda_available(&reason)) {
    std::printf("bench_cuda: skipped, no CUDA device: %s\n", reason.c_str());
    return 0;
  }
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t{256} << 20);
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const int blocks = prop.multiProcessorCount * 8;  // as the backend launches them

  // host data: fp32 masters ~ N(0, 0.02), bf16/fp16 copies with every fifth element one ULP off
  std::vector<float> h_master(n);
  std::vector<uint16_t> h_bf16(n), h_f16(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (auto& x : h_master) x = normal(rng);
  auto cpu = make_cpu_backend();
  cpu->downcast(h_master.data(), DType::BF16, h_bf16.data(), n);
  cpu->downcast(h_master.data(), DType::F16, h_f16.data(), n);
  for (size_t i = 0; i < n; i += 5) {
    ++h_bf16[i];
    ++h_f16[i];
  }

  float *d_master = nullptr, *d_f32out = nullptr, *d_copy = nullptr;
  uint16_t *d_bf16 = nullptr, *d_f16 = nullptr, *d_out16 = nullptr;
  void* d_part = nullptr;
  unsigned long long* d_hist = nullptr;
  dmalloc(&d_master, n * 4);
  dmalloc(&d_copy, n * 4);
  dmalloc(&d_f32out, n * 4);
  dmalloc(&d_bf16, n * 2);
  dmalloc(&d_f16, n * 2);
  dmalloc(&d_out16, n * 2);
  dmalloc(&d_part,
          std::max(sizeof(cuda::DivPartial), sizeof(cuda::ValPartial)) * static_cast<size_t>(blocks));
  dmalloc(&d_hist, 1024 * sizeof(unsigned long long));
  check(cudaMemcpy(d_master, h_master.data(), n * 4, cudaMemcpyHostToDevice), "H2D");
  check(cudaMemcpy(d_bf16, h_bf16.data(), n * 2, cudaMemcpyHostToDevice), "H2D");
  check(cudaMemcpy(d_f16, h_f16.data(), n * 2, cudaMemcpyHostToDevice), "H2D");

  const double nn = static_cast<double>(n);
  struct Row {
    std::string name;
    double bytes, ms;
  };
  std::vector<Row> rows;
  const double copy_ms =
      best_ms(repeats, [&] { check(cudaMemcpy(d_copy, d_master, n * 4, cudaMemcpyDeviceToDevice), "D2D"); });
  rows.push_back({"cudaMemcpy D2D (r+w)", 8 * nn, copy_ms});
  auto div = static_cast<cuda::DivPartial*>(d_part);
  auto val = static_cast<cuda::ValPartial*>(d_part);
  rows.push_back({"divergence bf16 vs fp32", 6 * nn, best_ms(repeats, [&] {
                    check(cuda::launch_divergence(d_bf16, 1, d_master, n, div, blocks, d_hist, nullptr),
                          "divergence");
                  })});
  rows.push_back({"divergence f16 vs fp32", 6 * nn, best_ms(repeats, [&] {
                    check(cuda::launch_divergence(d_f16, 0, d_master, n, div, blocks, d_hist, nullptr),
                          "divergence");
                  })});
  rows.push_back({"value_stats fp32", 4 * nn, best_ms(repeats, [&] {
                    check(cuda::launch_values(d_master, 2, n, val, blocks, d_hist, nullptr), "values");
                  })});
  rows.push_back({"value_stats bf16", 2 * nn, best_ms(repeats, [&] {
                    check(cuda::launch_values(d_bf16, 1, n, val, blocks, d_hist, nullptr), "values");
                  })});
  rows.push_back({"upcast bf16->fp32 (r+w)", 6 * nn, best_ms(repeats, [&] {
                    check(cuda::launch_upcast(d_bf16, true, d_f32out, n, nullptr), "upcast");
                  })});
  rows.push_back({"downcast fp32->f16 (r+w)", 6 * nn, best_ms(repeats, [&] {
                    check(cuda::launch_downcast(d_master, false, d_out16, n, nullptr), "downcast");
                  })});

  const double copy_gbs = rows[0].bytes / rows[0].ms / 1e6;
  std::printf("%s (sm_%d%d, %d SMs), %zu elements, best of %d\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, n, repeats);
  std::printf("%-28s %10s %10s %10s\n", "kernel", "ms", "GB/s", "of copy");
  for (const auto& r : rows) {
    const double gbs = r.bytes / r.ms / 1e6;
    std::printf("%-28s %10.3f %10.1f %9.0f%%\n", r.name.c_str(), r.ms, gbs, 100.0 * gbs / copy_gbs);
  }

  // Same divergence input, end to end from host memory.
  auto gpu = make_backend(DeviceKind::Cuda);
  DivergenceStats dg, dc;
  const double gpu_ms =
      host_best_ms(3, [&] { dg = gpu->divergence(h_bf16.data(), DType::BF16, h_master.data(), n); });
  const double cpu_ms =
      host_best_ms(3, [&] { dc = cpu->divergence(h_bf16.data(), DType::BF16, h_master.data(), n); });
  std::printf("\ndivergence bf16, %zu elements (%.2f GB) from host memory:\n", n, 6 * nn / 1e9);
  std::printf("  %-40s %10.1f ms %8.1f GB/s\n", cpu->description().c_str(), cpu_ms, 6 * nn / cpu_ms / 1e6);
  std::printf("  %-40s %10.1f ms %8.1f GB/s  (incl. staging + H2D)\n", gpu->description().c_str(), gpu_ms,
              6 * nn / gpu_ms / 1e6);
  std::printf("  %-40s %10.1f ms\n", "GPU kernel only", rows[1].ms);
  std::printf("  exact %llu vs %llu, %s\n", static_cast<unsigned long long>(dg.exact),
              static_cast<unsigned long long>(dc.exact),
              dg.exact == dc.exact && dg.count == dc.count ? "agree" : "DISAGREE");
  return dg.exact == dc.exact ? 0 : 1;
}
