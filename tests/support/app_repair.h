#pragma once
// Session::repair_source, what the apps run for a source that repairs itself, driven as a test needs it:
// a session opens `in`, the repair runs with its writes watched by `io` (job_watching_io.h), and the session
// is polled until the outcome arrives (at most 2 minutes per wait). Empty when the source never opened.
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "ckptdoc/session/session.h"
#include "job_watching_io.h"

namespace ckptdoc::test {

inline std::optional<session::Outcome<sources::Outcome>> app_repair(const std::string& in,
                                                                    const sources::RepairRequest& request,
                                                                    JobWatchingIo& io) {
  session::Session s;
  s.open(in);
  std::optional<session::Outcome<sources::Outcome>> result;
  auto pump = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 60000 && !done(); ++i) {
      s.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return done();
  };
  if (!pump([&] { return s.repairing_source() != nullptr; })) return result;
  ScopedFileIo scoped(io);
  io.set_job(s.repair_source(request, [&](session::Outcome<sources::Outcome>& r) { result = r; }));
  pump([&] { return result.has_value(); });
  return result;
}

}  // namespace ckptdoc::test
