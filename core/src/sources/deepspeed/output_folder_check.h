#pragma once
// The one check every writer of a checkpoint folder (repair, convert, snapshot conversion) makes before it
// writes: where the output may go, and what it may replace there.
#include <string>
#include <vector>

namespace ckptdoc::deepspeed::detail {

struct CheckedOutputFolder {
  std::string path;      // normalised
  bool existed = false;  // a folder was there (empty, or a checkpoint under --force): publishing replaces it;
                         // otherwise publishing never replaces what another process put there meanwhile
  std::string restored_from;  // a killed replacement's "-replaced-<pid>" folder put back as `path`, if any
};

// First puts back an output a killed run had moved aside to replace it (restore_interrupted_replacement),
// then throws ckptdoc::Error (where "--output" or "--force") when `output` is empty, lies inside or holds one
// of `inputs` (folders, normalised here), is not a folder, or is a non-empty folder and `force` is false or
// it holds anything but a DeepSpeed checkpoint (detect.h: holds_only_a_deepspeed_checkpoint), naming that
// entry.
CheckedOutputFolder check_output_folder(const std::string& output, const std::vector<std::string>& inputs,
                                        bool force);

// The check every single-file export makes last (after refusing outputs among its inputs): `output`
// (normalised) may not be a folder, and replaces an existing file only when `force` is set. Throws
// ckptdoc::Error ("--output").
void check_output_file(const std::string& output, bool force);

// Removes what a killed writer left beside `output` ("<name>.ckptdoc-partial-<pid>", "-replaced-<pid>",
// "-tmp-<pid>") when no process of that id runs here and it was last changed over a minute ago (or no one
// holds its claim, on a local file system). A "-replaced-" folder is removed only while `output` exists:
// without it, that folder is the only copy of the output it held. Returns the paths removed, for the caller
// to report.
std::vector<std::string> remove_dead_leftovers(const std::string& output);

// A run killed between moving the output it replaced aside ("<output>.ckptdoc-replaced-<pid>") and renaming
// its new output into place leaves no `output` and the only copy of the old one aside. When `output` is
// absent and such a dead writer's folder is there, it is renamed back to `output`. Returns the folder
// restored, or "".
std::string restore_interrupted_replacement(const std::string& output);

}  // namespace ckptdoc::deepspeed::detail
