#pragma once
// The step every repair ends with: the partial folder renamed into place as the output (replacing an
// existing one the plan allowed), its parent fsynced. Re-opening and verifying a DeepSpeed output is its
// source's (sources/checkpoint/verify_output.h).
#include <string>

#include "ckptdoc/io/file_io.h"

namespace ckptdoc::repair::detail {

// Throws an Io error naming `path` and `call` when `err` (an errno) is not 0 (mkdir's EEXIST passes).
void check_io(int err, const std::string& path, const char* call);

// Removes a folder tree, ignoring errors (cleanup after a failure).
void remove_tree_quietly(const std::string& p);

// Renames `partial` to `out`, then fsyncs the parent folder so the rename is durable. With `replace_existing`
// (a folder was at `out` when the plan was made: empty, or a checkpoint under --force) that folder is moved
// aside first and removed last; otherwise nothing at `out` is ever replaced: when another process published
// there meanwhile, this throws and keeps its folder. `renamed` turns true once `out` is the new folder,
// durably. On failure it throws with `out` as it was before.
//
// `kept_aside` (the MPI repair, whose other storages may still fail): the replaced folder is not removed but
// left where its path says, for finish_publish (all published) or undo_publish (another storage failed).
void publish_folder(const std::string& partial, const std::string& out, FileIo& io, bool& renamed,
                    bool replace_existing, std::string* kept_aside = nullptr);

// Puts back what publish_folder replaced: the new `out` is removed and the folder kept aside (if any)
// renamed back to `out`. For a failure after the publish; never throws.
void undo_publish(const std::string& out, const std::string& kept_aside, FileIo& io);

}  // namespace ckptdoc::repair::detail
