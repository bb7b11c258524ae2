// Memory of the weight-vs-master density of one param: what the plot used to do (assemble the whole param as
// float32 vectors, then density_2d) against deepspeed::param_density (streamed from the memory map in chunks)
// on the same checkpoint and param. Memory is the process's anonymous resident set (the mapped file's pages
// are the page cache's, shared and reclaimable), sampled every 2 ms; the counts of both must be equal.
// Usage: bench_density CHECKPOINT [PARAM]   (default: the largest trainable param)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "ckptdoc/analysis/density.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/param_density.h"

using namespace ckptdoc;

namespace {

uint64_t rss_anon_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("RssAnon:", 0) == 0) return std::stoull(line.substr(8));
  return 0;
}

// Peak anonymous memory above the level before `fn`, in MiB, and its seconds.
template <class Fn>
std::pair<double, double> peak_of(Fn fn) {
  const uint64_t base = rss_anon_kib();
  std::atomic<bool> done{false};
  std::atomic<uint64_t> peak{base};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max(peak.load(), rss_anon_kib());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  peak = std::max(peak.load(), rss_anon_kib());
  done = true;
  sampler.join();
  return {static_cast<double>(peak.load() - base) / 1024.0, s};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_density CHECKPOINT [PARAM]\n");
    return 2;
  }
  const auto ckpt = deepspeed::Checkpoint::open(argv[1]);
  const auto& cat = ckpt->catalog();
  int group = -1, param = -1;
  int64_t numel = -1;
  for (size_t g = 0; g < cat.groups.size(); ++g)
    for (size_t p = 0; p < cat.groups[g].params.size(); ++p) {
      const auto& pe = cat.groups[g].params[p];
      if ((argc > 2 && pe.name == argv[2]) || (argc <= 2 && pe.numel > numel))
        group = static_cast<int>(g), param = static_cast<int>(p), numel = pe.numel;
    }
  if (group < 0) {
    std::fprintf(stderr, "no such param\n");
    return 2;
  }
  const auto& pe = cat.groups[static_cast<size_t>(group)].params[static_cast<size_t>(param)];
  std::printf("param %s: %lld elements (%.2f GB as float32), 80 x 80 bins\n", pe.name.c_str(),
              static_cast<long long>(pe.numel), static_cast<double>(pe.numel) * 4 / 1e9);
  analysis::Density2D streamed, whole;
  const auto ours = peak_of([&] { streamed = deepspeed::param_density(*ckpt, group, param, 80); });
  const auto before = peak_of([&] {
    const auto data = ckpt->assemble(group, param, false);
    whole = analysis::density_2d(data.lp->to_float(), data.fp32, 80);
  });
  std::printf("%-44s %12s %10s\n", "", "peak MiB", "seconds");
  std::printf("%-44s %12.1f %10.2f\n", "assemble + density_2d (the plot before)", before.first,
              before.second);
  std::printf("%-44s %12.1f %10.2f\n", "param_density (streamed from the map)", ours.first, ours.second);
  const bool same = streamed.counts == whole.counts && streamed.pairs == whole.pairs;
  std::printf("counts identical: %s (%llu pairs)\n", same ? "yes" : "NO",
              static_cast<unsigned long long>(streamed.pairs));
  return same ? 0 : 1;
}
