// `ckptdoc watch DIR`: one line per snapshot committed into DIR (the out_dir of ckptdoc_hook.every/dump):
// tag, step, worst finding, exact fraction, grad norm, loss scale. Woken by the file system (inotify), never
// reading a snapshot before its manifest. Exit 0 when stopped (--once/--count reached), 1 on a finding at
// --fail-on, 2 when DIR is unusable, 3 when --timeout ran out first.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"
#include "ckptdoc/sources/snapshot/timeline.h"
#include "ckptdoc/sources/snapshot/watcher.h"
#include "commands.h"
#include "device_choice.h"

namespace ckptdoc::cli {
namespace {

using nlohmann::json;
using snapshot::SnapshotSummary;
using snapshot::WatchEvent;

int severity_rank(const std::string& s) {
  return s == "error" ? 3 : s == "warning" ? 2 : s == "info" ? 1 : 0;
}

json optional_json(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? json(*v) : json(nullptr);
}

std::string fmt(const char* f, double v) {
  char b[48];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

void print_line(const SnapshotSummary& s, double seconds, bool as_json) {
  if (as_json) {
    json j{{"event", "snapshot"},
           {"tag", s.tag},
           {"dir", s.dir},
           {"id", s.id},
           {"global_steps", s.global_steps},
           {"skipped_steps", s.skipped_steps},
           {"worst", s.worst_severity.empty() ? json(nullptr) : json(s.worst_severity)},
           {"worst_code", s.worst_code.empty() ? json(nullptr) : json(s.worst_code)},
           {"codes", s.codes},
           {"exact_fraction", std::isnan(s.exact_fraction) ? json(nullptr) : json(s.exact_fraction)},
           {"grad_norm", optional_json(s.grad_norm)},
           {"loss_scale", optional_json(s.loss_scale)},
           {"overflow", s.overflow ? json(*s.overflow) : json(nullptr)},
           {"nonfinite_values", s.nonfinite_values},
           {"nonfinite_grads", s.nonfinite_grads},
           {"seconds", seconds}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::string worst = s.worst_severity.empty() ? "ok" : s.worst_severity + " " + s.worst_code;
    if (s.worst_severity == "error") worst = "ERROR " + s.worst_code;
    std::printf("%-16s step %-8lld %-42s exact %s  grad norm %s  loss scale %s\n", s.tag.c_str(),
                static_cast<long long>(s.global_steps), worst.c_str(),
                std::isnan(s.exact_fraction) ? "-      " : fmt("%6.2f%%", s.exact_fraction * 100).c_str(),
                s.grad_norm ? fmt("%.4g", *s.grad_norm).c_str() : "-",
                s.loss_scale ? fmt("%.6g", *s.loss_scale).c_str() : "-");
  }
  std::fflush(stdout);
}

// `kind`: the error's kind (kind_name), in the JSON only.
void print_event(const WatchEvent& e, const char* what, const std::string& error, bool as_json,
                 std::string_view kind = {}) {
  if (as_json) {
    json j{{"event", what}, {"tag", e.tag}, {"dir", e.dir}};
    if (!error.empty()) j["error"] = error;
    if (!kind.empty()) j["kind"] = kind;
    std::printf("%s\n", j.dump().c_str());
  } else if (!error.empty()) {
    std::printf("%-16s %s: %s\n", e.tag.c_str(), what, error.c_str());
  } else if (std::string(what) == "removed") {
    std::printf("%-16s removed\n", e.tag.c_str());
  }
  std::fflush(stdout);
}

// A checkpoint folder is not where snapshots appear: watching it would wait forever in silence. An empty
// folder, or one the hook has written into, is watched.
std::optional<std::string> not_a_snapshot_folder(const std::string& dir) {
  if (snapshot::is_snapshot_dir(dir) || snapshot::holds_snapshots(dir)) return std::nullopt;
  std::string what;
  try {
    const auto ckpt = deepspeed::Checkpoint::open(dir);
    const auto& cat = ckpt->catalog();
    what = cat.weights_only ? "weights (" + cat.kind + ")" : cat.description;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return dir + " holds a " + what +
         ", not live-engine snapshots: watch follows the folder ckptdoc_hook writes snapshots into (its "
         "out_dir). "
         "For a checkpoint run: ckptdoc diagnose " +
         dir;
}

}  // namespace

int run_watch(const WatchOptions& o) {
  const int fail_rank = o.fail_on == "never" ? 99 : severity_rank(o.fail_on);
  if (fail_rank == 0) {
    std::fprintf(stderr, "ckptdoc watch: --fail-on must be error, warning, info or never\n");
    return 2;
  }
  if (const auto why = not_a_snapshot_folder(o.dir)) {
    std::fprintf(stderr, "ckptdoc watch: %s\n", why->c_str());
    return 2;
  }
  std::unique_ptr<snapshot::SnapshotWatcher> watcher;
  analysis::DiagnoseOptions dopt;
  try {
    watcher = std::make_unique<snapshot::SnapshotWatcher>(o.dir);
    dopt.device = choose_device(o.device);
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc watch: %s\n", e.what());
    return 2;
  }
  dopt.threads = o.threads;
  if (!o.json)
    std::fprintf(stderr, "ckptdoc watch: watching %s (%s); Ctrl-C stops\n", o.dir.c_str(),
                 watcher->event_driven() ? "file-system events" : "rescans every 0.5 s");
  const int want = o.once ? 1 : o.count;
  const auto start = std::chrono::steady_clock::now();
  snapshot::Timeline timeline;
  int shown = 0;
  for (;;) {
    int timeout_ms = -1;
    if (o.timeout > 0) {
      const double left =
          o.timeout - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (left <= 0) return want > 0 ? 3 : 0;
      timeout_ms = static_cast<int>(left * 1000) + 1;
    }
    for (const WatchEvent& e : watcher->wait(timeout_ms)) {
      if (e.kind == WatchEvent::Kind::Pending) {
        print_event(e, "pending", "", o.json);
        continue;
      }
      if (e.kind == WatchEvent::Kind::Removed) {
        timeline.mark_deleted(e.dir);
        print_event(e, "removed", "", o.json);
        continue;
      }
      const auto t0 = std::chrono::steady_clock::now();
      SnapshotSummary summary;
      try {
        const auto ckpt = deepspeed::Checkpoint::open(e.dir);
        const auto report = deepspeed::diagnose(*ckpt, dopt);
        summary = snapshot::summarize(*ckpt, report);
      } catch (const Error& ex) {  // deleted meanwhile (rotation), or damaged
        print_event(e, "unreadable", ex.what(), o.json, kind_name(ex.kind()));
        continue;
      } catch (const std::exception& ex) {
        print_event(e, "unreadable", ex.what(), o.json, kind_name(ErrorKind::Other));
        continue;
      }
      timeline.add(summary);
      for (const auto& p : timeline.points())
        if (p.dir == summary.dir) summary = p;  // with the findings only the series shows
      print_line(summary, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 o.json);
      ++shown;
      if (severity_rank(summary.worst_severity) >= fail_rank) return 1;
      if (want > 0 && shown >= want) return 0;
    }
  }
}

}  // namespace ckptdoc::cli
