// CPU statistics, divergence and the fused fragment pass vs a plain read of the same buffers, in GB/s, side
// by side, for the AVX2 path (where the CPU has it) and the portable scalar path. usage: bench_compute
// [elements (default 64Mi)] [threads (default: hardware)] [repeats (default 3)]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "ckptdoc/compute/backend.h"

using namespace ckptdoc;
using Clock = std::chrono::steady_clock;

namespace {

// Sums the buffers as 64-bit words on `threads` threads: the memory-read ceiling for the same bytes.
uint64_t read_all(const std::vector<const void*>& bufs, const std::vector<size_t>& bytes, unsigned threads) {
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      uint64_t acc = 0;
      for (size_t b = 0; b < bufs.size(); ++b) {
        const size_t words = bytes[b] / 8, per = (words + threads - 1) / threads;
        const auto* p = static_cast<const uint64_t*>(bufs[b]);
        for (size_t i = t * per, e = std::min(words, (t + 1) * per); i < e; ++i) acc += p[i];
      }
      total += acc;
    });
  }
  for (auto& th : pool) th.join();
  return total.load();
}

template <class F>
double best_seconds(int repeats, F&& f) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t{64} << 20);
  unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 0;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;

  std::vector<float> master(n);
  std::vector<uint16_t> lp(n), lp16(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (auto& x : master) x = normal(rng);
  auto backend = make_cpu_backend(threads);
  auto scalar = make_cpu_backend(threads, CpuPath::Scalar);
  backend->downcast(master.data(), DType::BF16, lp.data(), n);
  backend->downcast(master.data(), DType::F16, lp16.data(), n);
  for (size_t i = 0; i < n; i += 5) {
    lp[i] = static_cast<uint16_t>(lp[i] + 1);
    lp16[i] = static_cast<uint16_t>(lp16[i] + 1);
  }

  const double gb6 = static_cast<double>(n) * 6 / 1e9, gb4 = static_cast<double>(n) * 4 / 1e9,
               gb2 = static_cast<double>(n) * 2 / 1e9;
  volatile uint64_t sink = 0;
  const double t_read = best_seconds(repeats, [&] {
    sink = sink + read_all({master.data(), lp.data()}, {n * 4, n * 2}, threads);
  });
  const double read_gbs = gb6 / t_read;

  std::printf("%s, %zu elements (bf16 lp + fp32 master = %.2f GB per pass), best of %d\n",
              backend->description().c_str(), n, gb6, repeats);
  std::printf("%-40s %10s %10s %12s\n", "pass", "seconds", "GB/s", "of read");
  std::printf("%-40s %10.4f %10.2f %11.0f%%\n", "plain read (u64 sum)", t_read, read_gbs, 100.0);
  auto row = [&](const char* name, double gb, auto&& f) {
    const double t = best_seconds(repeats, f);
    std::printf("%-40s %10.4f %10.2f %11.0f%%\n", name, t, gb / t, 100.0 * gb / t / read_gbs);
  };

  DivergenceStats d;
  row("divergence (bf16 vs fp32)", gb6,
      [&] { d = backend->divergence(lp.data(), DType::BF16, master.data(), n); });
  row("divergence (fp16 vs fp32)", gb6,
      [&] { backend->divergence(lp16.data(), DType::F16, master.data(), n); });
  row("value_stats fp32", gb4, [&] { backend->value_stats(master.data(), DType::F32, n); });
  row("value_stats bf16", gb2, [&] { backend->value_stats(lp.data(), DType::BF16, n); });
  // what diagnose does per fragment with lp + fp32: GB/s of the distinct bytes (each array counted once)
  row("lp+fp32 stats + divergence, 3 calls", gb6, [&] {
    backend->value_stats(master.data(), DType::F32, n);
    backend->value_stats(lp.data(), DType::BF16, n);
    backend->divergence(lp.data(), DType::BF16, master.data(), n);
  });
  row("fragment_stats (fused, bf16)", gb6,
      [&] { backend->fragment_stats(lp.data(), DType::BF16, master.data(), n); });
  row("fragment_stats (fused, fp16)", gb6,
      [&] { backend->fragment_stats(lp16.data(), DType::F16, master.data(), n); });
  row("scalar path: divergence (bf16)", gb6,
      [&] { scalar->divergence(lp.data(), DType::BF16, master.data(), n); });
  row("scalar path: 3 calls (bf16)", gb6, [&] {
    scalar->value_stats(master.data(), DType::F32, n);
    scalar->value_stats(lp.data(), DType::BF16, n);
    scalar->divergence(lp.data(), DType::BF16, master.data(), n);
  });
  std::vector<uint16_t> out16(n);
  const double t_down =
      best_seconds(repeats, [&] { backend->downcast(master.data(), DType::BF16, out16.data(), n); });
  std::printf("%-40s %10.4f %10.2f %11s\n", "downcast fp32->bf16 (r+w)", t_down, gb6 / t_down, "-");
  std::printf("exact fraction %.4f, rel_l2 %.3e\n", d.exact_fraction(), d.rel_l2());
  return 0;
}
