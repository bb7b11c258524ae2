#pragma once
// Internal to core: a repair's copy of the input folder into its partial output, with progress and cancel.
#include <filesystem>
#include <functional>
#include <string>

#include "ckptdoc/task/progress.h"

namespace ckptdoc::io {

// Copies the folder `from` (links followed: the copy holds only files and folders, written only inside `to`)
// into `to` (made when absent); each file keeps its mode, made writable by its owner, and folders get the
// default mode. Before anything is written it refuses, naming the path, what the copy cannot hold: a link to
// a folder the copy already holds (a loop: each folder is copied once, so the walk is bounded), a link to a
// folder that holds `to`, a link to nothing, a socket, fifo or device (Error NotFound, Unsupported or
// PathEscape); nothing is left out silently. With
// `progress`: stage "copying <from's name>" over its bytes, counted and checked for a cancel (Cancelled)
// between files and steps of a few MiB. Throws ckptdoc::Error Io naming the file on a failed read or write.
// `keep`, when set, chooses which entries directly in `from` are copied (the others are left out, whole).
using KeepEntry = std::function<bool(const std::filesystem::directory_entry&)>;
void copy_tree(const std::string& from, const std::string& to, Progress* progress,
               const KeepEntry& keep = {});

}  // namespace ckptdoc::io
