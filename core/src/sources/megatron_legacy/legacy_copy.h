#pragma once
// The new folder a legacy Megatron repair writes, laid out as its input: a save folder's copy keeps the
// tracker (latest_checkpointed_iteration.txt) beside its iteration folder, an iteration folder's copy is that
// folder alone. Published whole or not at all (dcp::write_new_folder), never over what is there.
#include <functional>
#include <string>

#include "ckptdoc/task/progress.h"
#include "io/copy_tree.h"
#include "legacy_folder.h"

namespace ckptdoc::megatron_legacy {

// `output` normalised, refused (InvalidRequest) when it exists or lies inside the input.
std::string checked_output(const LegacyFolder& folder, const std::string& path, const std::string& output);

// Writes `out`: the tracker (a save folder's), the iteration folder's files that `keep` keeps (all without
// one; their bytes counted on `progress`), then `fill(iteration_dir)` writes what the repair changes.
void write_legacy_copy(const LegacyFolder& folder, const std::string& out, Progress* progress,
                       const io::KeepEntry& keep,
                       const std::function<void(const std::string& iteration_dir)>& fill);

}  // namespace ckptdoc::megatron_legacy
