// `ckptdoc convert PATH -o OUT --to universal|zero`: writes a DeepSpeed universal checkpoint from rigid ZeRO
// files, or rigid ZeRO files from a universal checkpoint, then verifies the result. Exit 0 verified, 1
// written but the verification failed, 2 refused or unusable input (nothing written).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/sources/checkpoint/convert.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/inspect_text.h"
#include "commands.h"
#include "device_choice.h"
#include "format_helpers.h"
#include "progress_bar.h"

namespace ckptdoc::cli {
namespace {

using nlohmann::json;

constexpr const char* kTargets =
    "choose a target with --to:\n"
    "  universal  a DeepSpeed universal checkpoint (one folder per param; loads at any data-parallel size "
    "with\n"
    "             \"checkpoint\": {\"load_universal\": true}); from ZeRO-1/2 or BF16_Optimizer files.\n"
    "             --for-deepspeed VERSION picks the layout that version's loader reads (default: the "
    "checkpoint's)\n"
    "  zero       rigid ZeRO-1/2 (or BF16_Optimizer) files for --world-size N, from a universal checkpoint;\n"
    "             --target DIR gives the optimizer hyper-parameters where the universal folder has none\n"
    "  checkpoint the DeepSpeed checkpoint a live-engine snapshot (ckptdoc_hook) holds (the default for a "
    "snapshot)";

void print_list(const char* title, const std::vector<std::string>& items) {
  if (items.empty()) return;
  std::printf("%s\n", title);
  for (const auto& i : items) std::printf("  - %s\n", i.c_str());
}

}  // namespace

int run_convert(const ConvertOptions& o) {
  if (o.to.empty()) {
    std::fprintf(stderr, "ckptdoc convert: %s\n", kTargets);
    return 2;
  }
  std::shared_ptr<deepspeed::Checkpoint> ckpt;
  universal::ConvertResult result;
  try {
    if (o.to == "universal" && (o.world_size > 0 || !o.target.empty()))
      throw Error("", "--world-size/--target", "only used with --to zero");
    if (o.to == "zero" && !o.for_deepspeed.empty())
      throw Error("", "--for-deepspeed", "only used with --to universal");
    deepspeed::OpenOptions open;
    open.tag = o.tag;
    ckpt = deepspeed::Checkpoint::open(o.path, open);
    const DeviceKind device = choose_device(o.device);
    if (!o.json && !o.quiet) {
      std::printf("Converting %s (%s) to %s\n", ckpt->catalog().tag_dir.c_str(),
                  deepspeed::summary_text(ckpt->catalog()).c_str(),
                  o.to == "universal" ? "a universal checkpoint" : "rigid ZeRO files");
      std::fflush(stdout);
    }
    Progress progress;
    ProgressBar bar(progress);
    if (o.to == "universal") {
      universal::ToUniversalOptions u;
      u.for_deepspeed = o.for_deepspeed;
      u.tag = o.output_tag;
      u.force = o.force;
      u.device = device;
      result = universal::convert_to_universal(*ckpt, o.output, u, &progress);
    } else {
      universal::ToZeroOptions z;
      if (o.world_size > 0) z.world_size = o.world_size;
      if (!o.target.empty()) z.target = o.target;
      z.tag = o.output_tag;
      z.force = o.force;
      z.device = device;
      result = universal::convert_to_zero(*ckpt, o.output, z, &progress);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc convert: nothing was written: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ckptdoc convert: nothing was written: %s\n", e.what());
    return 2;
  }
  const bool ok = result.verified();
  if (o.json) {
    auto written = deepspeed::Checkpoint::open(result.output);
    json j{{"output", result.output},
           {"tag", result.tag},
           {"to", result.target},
           {"params", result.params},
           {"files", result.files},
           {"bytes_written", result.bytes_written},
           {"write_seconds", result.write_seconds},
           {"verify_seconds", result.verify_seconds},
           {"assumptions", result.assumptions},
           {"notes", result.notes},
           {"verify_failures", result.verify_failures},
           {"verification", json::parse(analysis::report_json(result.verification, written->catalog()))},
           {"ok", ok}};
    std::printf("%s\n", j.dump(1).c_str());
    return ok ? 0 : 1;
  }
  if (!o.quiet) {
    std::printf("Wrote %s/%s (%s): %zu params, %zu files, %s in %.2f s; verified in %.2f s\n",
                result.output.c_str(), result.tag.c_str(),
                result.target == "universal" ? "named by latest_universal" : "named by latest", result.params,
                result.files, human_bytes(result.bytes_written).c_str(), result.write_seconds,
                result.verify_seconds);
    print_list("Assumed:", result.assumptions);
    print_list("Notes:", result.notes);
  }
  int errors = 0;
  for (const auto& f : result.verification.findings) {
    if (f.severity == analysis::Severity::Error) ++errors;
    if (f.severity != analysis::Severity::Info || !o.quiet)
      std::printf("  %s %s: %s\n", std::string(analysis::severity_name(f.severity)).c_str(), f.code.c_str(),
                  f.message.c_str());
  }
  for (const auto& f : result.verify_failures) std::printf("  verification failed: %s\n", f.c_str());
  if (ok)
    std::printf("Verified: re-opened, every tensor equal to its source bit for bit, no error findings.\n");
  else
    std::printf(
        "The written checkpoint failed verification (%d error finding(s), %zu failed check(s)); see above.\n",
        errors, result.verify_failures.size());
  return ok ? 0 : 1;
}

}  // namespace ckptdoc::cli
