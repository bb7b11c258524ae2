// How a self-reporting source's export and repair report progress and honour Cancel through the session, as
// the apps run them (#28): on a DCP folder, an export and a --reset-optimizer repair each watched to the end
// (how often the bytes move, the largest step between two readings, the time) and each cancelled at half its
// bytes (how long from cancel() to the job's end, and that nothing is left). Prints them; never run as a
// test.
//
//   bench_source_progress DCP_FOLDER OUT_DIR
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "ckptdoc/session/session.h"

using namespace ckptdoc;
using namespace ckptdoc::session;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Run {
  size_t readings = 0, moves = 0;
  uint64_t largest_step = 0, total = 0, done = 0;
  double seconds = 0, cancel_ms = -1, longest_still_ms = 0;
  std::string state;
};

// Reads the job every millisecond, as a view's timer would (the Qt view's is 50 ms); with `cancel_at` of the
// total, cancels once the bytes pass it.
// `export_to` a file, or else repair into `repair_to`.
Run watch(Session& s, const std::string& export_to, const std::string& repair_to,
          std::optional<double> cancel_at) {
  bool ended = false;
  const auto start = Clock::now();
  JobPtr job;
  if (!export_to.empty()) {
    sources::ExportRequest request;
    request.output = export_to;
    job = s.export_source(request, [&](Outcome<sources::ExportOutcome>&) { ended = true; });
  } else {
    sources::RepairRequest request;
    request.output = repair_to;
    request.reset_optimizer = true;
    job = s.repair_source(request, [&](Outcome<sources::Outcome>&) { ended = true; });
  }
  Run r;
  uint64_t last = 0;
  auto last_move = Clock::now();
  std::optional<Clock::time_point> cancelled;
  while (!ended) {
    s.poll();
    const uint64_t done = job->done();
    ++r.readings;
    if (done != last) {
      ++r.moves;
      if (done > last) r.largest_step = std::max(r.largest_step, done - last);  // less: a new stage
      r.longest_still_ms = std::max(r.longest_still_ms, ms_since(last_move));
      last_move = Clock::now();
      last = done;
    }
    if (cancel_at && !cancelled && job->total() > 0 &&
        static_cast<double>(done) >= *cancel_at * static_cast<double>(job->total())) {
      job->cancel();
      cancelled = Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  r.seconds = ms_since(start) / 1000;
  if (cancelled) r.cancel_ms = ms_since(*cancelled);
  r.total = job->total();
  r.done = job->done();
  r.state = std::string(job_state_name(job->state()));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bench_source_progress DCP_FOLDER OUT_DIR\n");
    return 2;
  }
  const std::string in = argv[1], dir = argv[2];
  Session s;
  s.settings().analyse_on_open = false;
  s.open(in);
  while (!s.is_open()) {
    s.poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto report = [](const char* what, const Run& r) {
    std::printf(
        "%s: %s in %.2f s, %llu of %llu bytes at the end; %zu readings, the bytes moved %zu times, "
        "largest step %.1f MiB, longest still %.0f ms",
        what, r.state.c_str(), r.seconds, static_cast<unsigned long long>(r.done),
        static_cast<unsigned long long>(r.total), r.readings, r.moves,
        static_cast<double>(r.largest_step) / (1 << 20), r.longest_still_ms);
    if (r.cancel_ms >= 0) std::printf("; cancel() to the job's end %.1f ms", r.cancel_ms);
    std::printf("\n");
  };
  report("export          ", watch(s, dir + "/whole.safetensors", "", std::nullopt));
  report("export cancelled", watch(s, dir + "/cancelled.safetensors", "", 0.5));
  report("repair          ", watch(s, "", dir + "/fixed", std::nullopt));
  report("repair cancelled", watch(s, "", dir + "/cancelled-fixed", 0.5));
  size_t left = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("cancelled", 0) == 0) ++left;
  std::printf("left beside the cancelled output: %zu entries\n", left);
  return 0;
}
