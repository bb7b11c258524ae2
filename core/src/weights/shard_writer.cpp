// Writes a planned set of shards (and their index) into a folder, atomically (see weights/shards.h).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/weights/shards.h"
#include "io/partial_folder.h"

namespace fs = std::filesystem;

namespace ckptdoc::weights {
namespace {

// The files a loader would take for weights of this family: the single file, its index, numbered shards.
bool in_family(const std::string& name, ShardFormat f) {
  static const std::regex st(R"(model(-\d{5,}-of-\d{5,})?\.safetensors(\.index\.json)?)");
  static const std::regex pt(R"(pytorch_model(-\d{5,}-of-\d{5,})?\.bin(\.index\.json)?)");
  return std::regex_match(name, f == ShardFormat::Safetensors ? st : pt);
}

// Writes `shard` at `path`; a torch file's archive folder is named after `final_name`, the name it is
// published under (torch.save names it after the file).
void write_one(const std::string& path, const std::string& final_name,
               const std::vector<NamedTensor>& tensors, const ShardPlan::Shard& shard, ShardFormat format) {
  if (format == ShardFormat::Safetensors) {
    std::vector<NamedTensor> part;
    part.reserve(shard.tensors.size());
    for (size_t i : shard.tensors) part.push_back(tensors[i]);
    sort_as_safetensors_saves(part);  // laid out as save_file lays out zero_to_fp32.py's shards
    write_safetensors_file(path, part, {{"format", "pt"}});
    return;
  }
  Value root = Value::dict();  // zero_to_fp32.py saves each shard as a plain dict
  for (size_t i : shard.tensors) root.set(tensors[i].name, Value::tensor(tensors[i].tensor));
  TorchWriteOptions o;
  o.archive_name = fs::path(final_name).stem().string();  // as torch.save names the archive folder
  write_torch_file(path, root, o);
}

void write_text_file(const std::string& path, const std::string& text) {
  AtomicFile out(path);
  out.write(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  out.commit();
}

}  // namespace

ShardedOutput write_shards(const std::vector<NamedTensor>& tensors, const ShardPlan& plan,
                           const std::string& folder, ShardFormat format, bool force) {
  if (plan.shards.empty())
    throw Error(ErrorKind::InvalidRequest, folder, "", "nothing to write: the export holds no tensors");
  std::error_code ec;
  const fs::path dir = fs::path(folder).lexically_normal();
  const bool exists = fs::exists(dir, ec);
  if (exists && !fs::is_directory(dir, ec))
    throw Error(ErrorKind::InvalidRequest, folder, "",
                "is a file; with --max-shard-size the output (-o) names a folder");
  bool empty = !exists || fs::is_empty(dir, ec);
  std::vector<std::string> family;
  if (!empty) {
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (in_family(e.path().filename().string(), format)) family.push_back(e.path().filename().string());
    std::sort(family.begin(), family.end());
    if (!family.empty() && !force) {
      std::string list;
      for (const auto& f : family) list += (list.empty() ? "" : ", ") + f;
      throw Error(ErrorKind::OutputExists, folder, "",
                  "already holds weights files (" + list + "); pass --force to replace them");
    }
  }

  ShardedOutput out;
  out.folder = dir.string();
  if (empty) {
    // Build beside the target, then rename it into place: the folder appears complete or not at all.
    if (dir.has_parent_path() && (fs::create_directories(dir.parent_path(), ec), ec))
      throw Error(ErrorKind::Io, dir.parent_path().string(), "", "cannot create the folder: " + ec.message());
    io::PartialFolder partial(dir.string(), current_io());  // removed on failure: nothing half-done stays
    for (const auto& s : plan.shards) {
      try {
        write_one(partial.path() + "/" + s.file, s.file, tensors, s, format);
      } catch (const Error& e) {
        // Named as the user asked for it: the partial folder is gone when they read this.
        throw Error(e.kind(), (dir / s.file).string(), e.where(), e.detail() + " (nothing was published)");
      }
      out.files.push_back(s.file);
      out.bytes += fs::file_size(partial.path() + "/" + s.file, ec);
    }
    if (plan.sharded()) {
      write_text_file(partial.path() + "/" + index_name(format), index_json(tensors, plan));
      out.files.push_back(index_name(format));
    }
    if (exists) fs::remove(dir, ec);  // an empty folder the user made for us
    if (const int rc = current_io().rename_noreplace(partial.path(), dir.string());
        rc == EEXIST || rc == ENOTEMPTY)
      throw Error(
          ErrorKind::OutputExists, folder, "",
          "another process published an output here while ckptdoc wrote this one; that output is kept and "
          "this one was not published");
    else if (rc != 0)
      throw Error(ErrorKind::Io, folder, "",
                  std::string("rename of the finished folder failed: ") + std::strerror(rc));
    partial.keep();
    const std::string parent = dir.has_parent_path() ? dir.parent_path().string() : ".";
    current_io().fsync_dir(parent.empty() ? "." : parent);
    return out;
  }

  // An existing folder with other files (and, under --force, an older family of weights files): every new
  // file is written under a staging name first, so a run that fails or is cancelled part way leaves the
  // folder as it was, the older family whole. Only once all are written are they renamed over their final
  // names, the index last; stale files of the family (an old index, shards of another count) go after.
  const std::string staging = ".ckptdoc-staged-" + std::to_string(::getpid());
  auto staged = [&](const std::string& f) { return (dir / (f + staging)).string(); };
  std::vector<std::string> names;  // final names, in write order
  for (const auto& s : plan.shards) names.push_back(s.file);
  if (plan.sharded()) names.push_back(index_name(format));
  // A file already under a staging name is not this run's: writing there would replace it (AtomicFile
  // replaces a path that exists when it opens), then publish it under a final name.
  for (const auto& f : names)
    if (fs::symlink_status(staged(f), ec).type() != fs::file_type::not_found)
      throw Error(ErrorKind::OutputExists, staged(f), "",
                  "exists, and ckptdoc stages " + f +
                      " under this name before renaming it into place; this file is not ckptdoc's to "
                      "replace: move it away and export again (nothing was written)");
  size_t staged_count = 0;  // names[0..staged_count) are written under their staging names
  try {
    for (const auto& s : plan.shards) {
      write_one(staged(s.file), s.file, tensors, s, format);
      ++staged_count;
      out.bytes += fs::file_size(staged(s.file), ec);
    }
    if (plan.sharded()) {
      write_text_file(staged(index_name(format)), index_json(tensors, plan));
      ++staged_count;
    }
  } catch (...) {
    for (size_t i = 0; i < staged_count; ++i) current_io().unlink(staged(names[i]));
    throw;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (const int rc = current_io().rename(staged(names[i]), (dir / names[i]).string()); rc != 0) {
      for (size_t j = i; j < names.size(); ++j) current_io().unlink(staged(names[j]));
      throw Error(ErrorKind::Io, (dir / names[i]).string(), "",
                  std::string("rename of the written file into place failed: ") + std::strerror(rc) +
                      (i ? " (" + std::to_string(i) + " files before it were already replaced)" : ""));
    }
    out.files.push_back(names[i]);
  }
  for (const auto& f : family) {
    if (std::find(names.begin(), names.end(), f) != names.end()) continue;  // replaced, not stale
    if (const int rc = current_io().unlink((dir / f).string()); rc != 0)
      throw Error(ErrorKind::Io, (dir / f).string(), "",
                  std::string("cannot remove the stale weights file: ") + std::strerror(rc));
    out.removed.push_back(f);
  }
  current_io().fsync_dir(dir.string());
  return out;
}

}  // namespace ckptdoc::weights
