#pragma once
// Where a conversion writes: a new folder beside the input, filled under a temporary name and renamed into
// place (as repair does), so the output either holds a complete checkpoint or does not exist.
#include <functional>
#include <string>

#include "ckptdoc/io/file_io.h"
#include "ckptdoc/task/progress.h"
#include "sources/deepspeed/output_folder_check.h"

namespace ckptdoc::universal::detail {

using deepspeed::detail::CheckedOutputFolder;

// The normalised output folder after checking it is neither inside the input (save or tag folder) nor holding
// it, and is absent, empty, or (with `force`) a DeepSpeed checkpoint and nothing else. Throws ckptdoc::Error
// naming --output or --force otherwise. Removes what killed writers left beside it.
CheckedOutputFolder checked_output(const std::string& output, const std::string& input_save_dir,
                                   const std::string& input_tag_dir, bool force);

// Runs write(partial, io) on "<out>.ckptdoc-partial-<pid>", makes all of it durable, renames it to `out`
// (replacing only a folder that was there when checked, moved aside first and removed last; never one another
// process published meanwhile) and fsyncs the parent. `write` gets a FileIo over `io` whose fsyncs are made
// together before the rename (io/deferred_sync.h). Any failure removes the partial folder, leaves `out` as it
// was, and rethrows; so does a cancel of `progress` seen just before the rename (Cancelled).
void publish_folder(const CheckedOutputFolder& out, FileIo& io,
                    const std::function<void(const std::string& dir, FileIo& io)>& write,
                    const Progress* progress = nullptr);

// mkdir through `io`; an existing folder is fine, other errors throw naming the path.
void make_dir(FileIo& io, const std::string& path);

}  // namespace ckptdoc::universal::detail
