// convert_to_checkpoint: each DeepSpeed file of a snapshot written with core's torch writer into a partial
// folder, renamed into place, re-read and compared with the snapshot bit for bit.
#include <chrono>
#include <filesystem>

#include "ckptdoc/error.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "ckptdoc/sources/snapshot/convert.h"
#include "io/partial_folder.h"
#include "repair/publish.h"
#include "sources/deepspeed/output_folder_check.h"

namespace fs = std::filesystem;

namespace ckptdoc::snapshot {
namespace {

// Compares a written file with the snapshot's version: same tree, and every storage (whole, padding included)
// byte for byte in the same order.
void compare(const TorchFile& want, const TorchFile& got, const std::string& name,
             std::vector<std::string>& bad) {
  if (!want.root.equals(got.root)) {
    bad.push_back(name + ": the written pickle tree differs from the snapshot's");
    return;
  }
  if (want.storages.size() != got.storages.size()) {
    bad.push_back(name + ": " + std::to_string(got.storages.size()) + " storages written, the snapshot has " +
                  std::to_string(want.storages.size()));
    return;
  }
  for (size_t i = 0; i < want.storages.size(); ++i) {
    const auto& a = *want.storages[i];
    const auto& b = *got.storages[i];
    const auto x = a.bytes(), y = b.bytes();
    if (a.dtype != b.dtype || x.size() != y.size() || !std::equal(x.begin(), x.end(), y.begin()))
      bad.push_back(name + ": storage " + std::to_string(i) + " differs from the snapshot's");
  }
}

}  // namespace

ToCheckpointResult convert_to_checkpoint(const deepspeed::Checkpoint& ck, const std::string& out_dir,
                                         const ToCheckpointOptions& options, Progress* progress) {
  const auto start = std::chrono::steady_clock::now();
  const Snapshot* snap = ck.snapshot();
  if (!snap)
    throw Error(ErrorKind::Unsupported, ck.catalog().tag_dir, "",
                "not a ckptdoc snapshot (convert writes checkpoints from snapshots)");
  const Manifest& m = snap->manifest();
  ToCheckpointResult result;
  const auto checked = deepspeed::detail::check_output_folder(out_dir, {snap->dir()}, options.force);
  result.save_dir = checked.path;
  deepspeed::detail::remove_dead_leftovers(result.save_dir);
  result.tag = options.tag.empty() ? "global_step" + std::to_string(m.live.global_steps) : options.tag;
  if (result.tag == "." || result.tag == ".." || result.tag.find('/') != std::string::npos)
    throw Error(ErrorKind::InvalidRequest, "", "--output-tag",
                "'" + result.tag + "' cannot name a tag folder");

  const auto& files = ck.catalog().files;
  uint64_t total = 0;
  for (const auto& f : files) total += f.bytes;
  if (progress) progress->set_stage("writing checkpoint files", total);

  FileIo& io = current_io();
  bool renamed = false;
  {
    io::PartialFolder made(result.save_dir, io);  // removed on failure: nothing half-done stays behind
    const std::string& partial = made.path();
    const std::string tag_dir = partial + "/" + result.tag;
    repair::detail::check_io(io.mkdir(tag_dir), tag_dir, "mkdir");
    for (const auto& f : files) {
      if (progress) progress->check();
      const TorchFile tf = snap->open_file(f.abs_path);
      deepspeed::write_checkpoint_file(tag_dir + "/" + f.path, tf.root, io);
      result.files.push_back(result.tag + "/" + f.path);
      result.bytes += tf.file_size;
      if (progress) progress->add(f.bytes);
    }
    for (const auto& extra : m.extra_files) {  // zero_to_fp32.py: DeepSpeed copies it beside `latest`
      const std::string from = (fs::path(snap->dir()) / extra).string();
      const std::string to = (fs::path(partial) / extra).string();
      std::error_code ec;
      if (!fs::is_regular_file(from, ec)) continue;
      deepspeed::copy_file(from, to, io);
      std::error_code pe;
      fs::permissions(to, fs::status(from, pe).permissions(), pe);
      result.files.push_back(extra);
    }
    deepspeed::write_text_file(partial + "/latest", result.tag, io);
    result.files.push_back("latest");
    repair::detail::check_io(io.fsync_dir(tag_dir), tag_dir, "fsync of directory");
    repair::detail::check_io(io.fsync_dir(partial), partial, "fsync of directory");
    if (progress) progress->check();  // a Cancel during the last write or the fsyncs: nothing is published
    repair::detail::publish_folder(partial, result.save_dir, io, renamed, checked.existed);
    made.keep();
  }

  if (progress) progress->set_stage("verifying", total);
  for (const auto& f : files) {
    try {
      const TorchFile want = snap->open_file(f.abs_path);
      const TorchFile got = TorchFile::open(result.save_dir + "/" + result.tag + "/" + f.path);
      compare(want, got, f.path, result.mismatches);
    } catch (const Error& e) {
      result.mismatches.push_back(f.path + ": " + e.what());
    }
    if (progress) progress->add(f.bytes);
  }
  try {
    result.invariant_failures =
        repair::check_loader_invariants(*deepspeed::Checkpoint::open(result.save_dir));
  } catch (const Error& e) {
    result.invariant_failures.push_back(std::string("the written checkpoint cannot be opened: ") + e.what());
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace ckptdoc::snapshot
