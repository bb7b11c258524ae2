#pragma once
// The new folder a Megatron-core repair writes, laid out as its input: a save folder's copy keeps the tracker
// beside its iteration folder, an iteration folder's copy is that folder alone.
#include <functional>
#include <string>

#include "ckptdoc/task/progress.h"
#include "megatron_folder.h"

namespace ckptdoc::megatron {

enum class CopyInput { Whole, Nothing };

// megatron-core 0.18+'s list of each file's sha256 in the iteration folder: a repair rewrites files it lists,
// so its copy would no longer match them. Every repair leaves it out of the output and says so.
inline constexpr const char* kIntegrity = "integrity.json";
bool has_integrity(const IterationFolder& folder);

// Writes `out` through dcp::write_new_folder (published whole or not at all, never over what is there): makes
// the iteration folder inside it (a copy of the input's with CopyInput::Whole, less kIntegrity, its bytes
// counted on `progress`), copies the tracker beside it for a save folder, then lets `fill(iteration_dir)`
// write what the repair changes. Where the iteration folder of `folder`'s copy lands in the new folder `out`.
std::string repaired_iteration_dir(const IterationFolder& folder, const std::string& out);

void write_repaired_copy(const IterationFolder& folder, const std::string& out, CopyInput copy,
                         Progress* progress,
                         const std::function<void(const std::string& iteration_dir)>& fill);

}  // namespace ckptdoc::megatron
