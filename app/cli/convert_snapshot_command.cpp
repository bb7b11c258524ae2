// `ckptdoc convert SNAPSHOT -o CKPT [--to checkpoint]`: a live-engine snapshot written back as the DeepSpeed
// checkpoint folder engine.save_checkpoint would have written at that step, then verified file by file.
// Exit 0 verified, 1 written but the verification failed, 2 refused or unusable input (nothing written).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"
#include "ckptdoc/sources/snapshot/convert.h"
#include "commands.h"
#include "format_helpers.h"
#include "progress_bar.h"

namespace ckptdoc::cli {

int run_convert_snapshot(const ConvertSnapshotOptions& o) {
  snapshot::ToCheckpointResult r;
  try {
    if (!o.to.empty() && o.to != "checkpoint")
      throw Error("", "--to", "'" + o.to + "' is not a target for a snapshot (it converts to: checkpoint)");
    deepspeed::OpenOptions open;
    open.tag = o.tag;
    const auto ckpt = deepspeed::Checkpoint::open(o.path, open);
    if (!ckpt->snapshot())
      throw Error(ckpt->catalog().tag_dir, "",
                  "not a ckptdoc snapshot (convert --to checkpoint reads snapshots "
                  "written by ckptdoc_hook)");
    const auto& m = ckpt->snapshot()->manifest();
    if (!o.json && !o.quiet) {
      std::printf("Converting snapshot %s (tag %s, step %lld, %s, dp %d) to a DeepSpeed checkpoint\n",
                  m.dir.c_str(), m.tag.c_str(), static_cast<long long>(m.live.global_steps),
                  m.optimizer.c_str(), m.world_size);
      std::fflush(stdout);
    }
    snapshot::ToCheckpointOptions opts;
    opts.tag = o.output_tag;
    opts.force = o.force;
    Progress progress;
    ProgressBar bar(progress);
    r = snapshot::convert_to_checkpoint(*ckpt, o.output, opts, &progress);
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc convert: %s\n", e.what());
    return 2;
  }
  if (o.json) {
    nlohmann::json j{{"save_dir", r.save_dir},     {"tag", r.tag},
                     {"files", r.files},           {"bytes", r.bytes},
                     {"seconds", r.seconds},       {"verified", r.verified()},
                     {"mismatches", r.mismatches}, {"invariant_failures", r.invariant_failures}};
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("Wrote %s (tag %s): %zu files, %s in %.2f s\n", r.save_dir.c_str(), r.tag.c_str(),
                r.files.size(), human_bytes(r.bytes).c_str(), r.seconds);
    for (const auto& m : r.mismatches) std::printf("  MISMATCH %s\n", m.c_str());
    for (const auto& m : r.invariant_failures) std::printf("  LOADER INVARIANT %s\n", m.c_str());
    std::printf(r.verified() ? "Verified: every file equals the snapshot's, bit for bit; resume with "
                               "engine.load_checkpoint(\"%s\")\n"
                             : "NOT verified (see above): do not resume from %s\n",
                r.save_dir.c_str());
  }
  return r.verified() ? 0 : 1;
}

}  // namespace ckptdoc::cli
