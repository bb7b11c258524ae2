// gpu_check: the CUDA backend against the CPU backend on tests/support/backend_cases.h (the cases the Qt test
// test_compute_cuda runs), as a plain executable for a bare GPU machine (no Qt). One line per case, PASS or
// FAIL with what differs; exit 0 when all pass, 1 when any fails, 77 without a usable CUDA device, 2 on
// usage.
//   gpu_check [--filter SUBSTRING] [--list] [--self-test]
// --self-test runs the same cases with the CPU backend's SIMD path standing in for the device and its scalar
// path as the reference: it proves the cases and this program on a machine without a GPU.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend_cases.h"
#include "ckptdoc/compute/backend.h"
#ifdef CKPTDOC_HAVE_NCCL
#include "ckptdoc/compute/reduction.h"
#include "compute/cuda/nccl_exchanger.h"
#include "compute/cuda/nccl_loader.h"
#include "compute/cuda/nccl_reducer.h"
#endif

using namespace ckptdoc;
using namespace ckptdoc::test;

namespace {

#ifdef CKPTDOC_HAVE_NCCL
// The NCCL reducer diagnose uses between MPI processes, as one rank on this GPU: loading libnccl at run time,
// the bootstrap, and the packed all-reduce of sums/min/max coming back unchanged. Empty when it passes.
std::string nccl_one_rank_case() {
  std::string why;
  if (!cuda::nccl_loadable(&why)) return "NCCL not loadable: " + why;
  auto r = cuda::make_nccl_reducer(0, 0, 1, [](void*, size_t, int) {});
  ReductionArrays a;
  for (uint64_t i = 0; i < 100'000; ++i) a.counts.push_back(i * 2654435761u);
  for (int i = 0; i < 1000; ++i) a.sums.push_back(i * 0.25 - 7);
  a.mins = {1e300, -0.0};
  a.maxs = {-1e300};
  const ReductionArrays before = a;
  r->allreduce(a);
  if (a.counts != before.counts) return "counts changed";
  if (a.sums != before.sums || a.mins != before.mins || a.maxs != before.maxs) return "doubles changed";
  return {};
}

// The NCCL exchanger of a distributed re-partition, as one rank: ncclSend/ncclRecv to itself in one group
// must bring every float back bit for bit (NaN payloads and -0 included), for a second, larger call too.
std::string nccl_one_rank_exchange_case() {
  std::string why;
  if (!cuda::nccl_loadable(&why)) return "NCCL not loadable: " + why;
  auto x = cuda::make_nccl_exchanger(0, 0, 1, [](void*, size_t, int) {});
  for (size_t n : {size_t{1000}, size_t{3'000'001}}) {
    std::vector<float> send(n), recv(n, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t bits = static_cast<uint32_t>(i * 2654435761u);
      std::memcpy(&send[i], &bits, 4);
    }
    x->alltoallv(send.data(), {n}, recv.data(), {n});
    if (std::memcmp(send.data(), recv.data(), n * 4) != 0)
      return "floats changed in a " + std::to_string(n) + "-float exchange";
  }
  return {};
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::string filter;
  bool list = false, self_test = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) {
      filter = argv[++i];
    } else if (a == "--list") {
      list = true;
    } else if (a == "--self-test") {
      self_test = true;
    } else {
      std::fprintf(stderr, "usage: gpu_check [--filter SUBSTRING] [--list] [--self-test]\n");
      return 2;
    }
  }
  const auto cases = backend_cases();
  if (list) {
    for (const auto& c : cases) std::printf("%s/%s\n", c.group.c_str(), c.name.c_str());
    return 0;
  }

  std::unique_ptr<Backend> dev, ref;
  try {
    if (self_test) {
      dev = make_cpu_backend(0, CpuPath::Best);
      ref = make_cpu_backend(0, CpuPath::Scalar);
    } else {
      std::string reason;
      if (!cuda_available(&reason)) {
        std::printf("gpu_check: SKIP: no CUDA device: %s\n", reason.c_str());
        std::fflush(stdout);
        return 77;
      }
      dev = make_backend(DeviceKind::Cuda);
      ref = make_cpu_backend();
    }
  } catch (const std::exception& e) {
    std::printf("gpu_check: SKIP: no usable CUDA device: %s\n", e.what());
    std::fflush(stdout);
    return 77;
  }
  std::printf("gpu_check: %s%s vs %s\n", self_test ? "self-test: " : "", dev->description().c_str(),
              ref->description().c_str());

  int passed = 0, failed = 0;
  const auto t_all = std::chrono::steady_clock::now();
  for (const auto& c : cases) {
    const std::string id = c.group + "/" + c.name;
    if (!filter.empty() && id.find(filter) == std::string::npos) continue;
    const auto t0 = std::chrono::steady_clock::now();
    std::string diff;
    try {
      diff = c.run(*dev, *ref);
    } catch (const std::exception& e) {
      diff = std::string("exception: ") + e.what();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (diff.empty()) {
      ++passed;
      std::printf("PASS %-48s %6.2f s\n", id.c_str(), s);
    } else {
      ++failed;
      std::printf("FAIL %-48s %6.2f s  %s\n", id.c_str(), s, diff.c_str());
    }
    std::fflush(stdout);
  }
#ifdef CKPTDOC_HAVE_NCCL
  const std::pair<const char*, std::string (*)()> nccl_cases[] = {
      {"nccl/one_rank_allreduce", nccl_one_rank_case},
      {"nccl/one_rank_exchange", nccl_one_rank_exchange_case}};
  for (const auto& [id, run] : nccl_cases) {
    if (self_test || !(filter.empty() || std::string(id).find(filter) != std::string::npos)) continue;
    std::string diff;
    try {
      diff = run();
    } catch (const std::exception& e) {
      diff = std::string("exception: ") + e.what();
    }
    if (diff.empty()) {
      ++passed;
      std::printf("PASS %-48s (NCCL %s)\n", id, cuda::nccl_version().c_str());
    } else {
      ++failed;
      std::printf("FAIL %-48s %s\n", id, diff.c_str());
    }
  }
#endif
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_all).count();
  std::printf("gpu_check: %d passed, %d failed in %.1f s: %s\n", passed, failed, total,
              failed ? "FAIL" : "PASS");
  if (passed + failed == 0) {
    std::printf("gpu_check: no case matches '%s'\n", filter.c_str());
    return 2;
  }
  return failed ? 1 : 0;
}
