#pragma once
// The process's one pool of worker threads, shared by every parallel loop in the core (scan, weights,
// checksums, universal conversion, deferred fsyncs, the CPU backend's chunks), so two jobs running at once
// share the cores instead of each starting its own threads for all of them.
#include <cstddef>
#include <functional>

namespace ckptdoc {

// std::thread::hardware_concurrency(), at least 1: what `threads = 0` ("all cores") means.
unsigned default_workers();

// Runs body(w) exactly once for every w in [0, workers), on the calling thread and on idle threads of the
// shared pool (grown on demand to `workers - 1`). The caller takes every w no pool thread has started, so a
// call makes progress with a busy pool and from inside another call's body (nesting cannot deadlock). Returns
// when every body has returned; rethrows the first exception after all of them stopped.
void run_on_workers(unsigned workers, const std::function<void(unsigned worker)>& body);

// Calls fn(i, w) for every i in [0, n) on up to `workers` threads (0: default_workers()), each index once; w
// is the worker running it. After the first exception no further index is started; it is rethrown once all
// stopped.
void parallel_for(size_t n, unsigned workers, const std::function<void(size_t i, unsigned worker)>& fn);

}  // namespace ckptdoc
