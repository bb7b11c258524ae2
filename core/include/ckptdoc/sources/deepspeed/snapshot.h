#pragma once
// Live-engine snapshots written by resources/python/ckptdoc_hook.py (docs/snapshot-format.md): a folder with
// one HDF5 file per rank and manifest.json, written last. Each rank file holds the DeepSpeed files that
// rank's engine.save_checkpoint would write (their pickles, and their storages as contiguous datasets mapped
// here at their file offsets), plus what only a live engine has: gradients, grad norm, overflow, loss scale,
// lr. deepspeed::Checkpoint::open reads a snapshot through this class, so every analysis sees a checkpoint.
// The reader lives in deepspeed/ (the analyses of snapshots in snapshot/) because Checkpoint reads through
// it.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::snapshot {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kFormatName = "ckptdoc-snapshot";
inline constexpr int kFormatVersion = 1;

// Engine-wide numbers at the moment of the dump (the same on every rank).
struct LiveScalars {
  int64_t global_steps = 0, global_samples = 0, skipped_steps = 0, micro_steps = 0;
  std::optional<double> grad_norm;          // DeepSpeed's last global grad norm (of the previous step)
  std::optional<double> gradient_clipping;  // the config's clip value (0: off)
  std::optional<bool> overflow;             // fp16: the last step overflowed (and was skipped)
  std::optional<double> loss_scale;         // fp16 only
  std::optional<double> min_loss_scale;
  bool dynamic_loss_scale = false;
  std::vector<std::optional<double>> lr;  // per optimizer param group
  bool grads_requested = false;           // dump(grads=True)
  bool has_grads = false;  // ... and the engine held gradients then (between backward and step)
};

struct RankEntry {
  int rank = 0;
  std::string file;  // rank file name inside the snapshot folder
  uint64_t bytes = 0;
  std::string host;
  bool has_grads = false;
};

struct Manifest {
  std::string dir;  // absolute snapshot folder
  std::string id, tag, optimizer, dtype, ds_version, torch_version;
  double created_unix = 0;
  int format_version = 0, world_size = 0, zero_stage = 0;
  LiveScalars live;
  std::vector<RankEntry> ranks;
  std::map<std::string, std::string> files;  // DeepSpeed file name -> rank file holding it
  std::vector<std::string> extra_files;      // plain files beside the manifest (zero_to_fp32.py)

  // Reads dir/manifest.json. Throws ckptdoc::Error naming the file and the key when it is missing or is not a
  // snapshot manifest of a version this build reads.
  static Manifest read(const std::string& dir);
};

// True when `dir` holds a manifest.json that names this format (a complete snapshot).
bool is_snapshot_dir(const std::string& dir);
// True when `dir` holds at least one complete snapshot folder.
bool holds_snapshots(const std::string& dir);
// The complete snapshots directly inside `dir`, oldest first (global_steps, then creation time). Folders
// without a manifest (being written) or with an unreadable one are left out.
std::vector<Manifest> list_snapshots(const std::string& dir);

// One recorded gradient tensor (a view on the mapped rank file) and the loss scale it is multiplied by.
struct GradTensor {
  Tensor tensor;
  double scale = 1.0;
};

class Snapshot {
 public:
  // `path`: a snapshot folder, or a folder of snapshots (the newest, or the one named `tag`). Reads the
  // manifest and every rank file's metadata (names, offsets, types: no tensor data). Throws ckptdoc::Error
  // naming the file when the snapshot is unusable (missing rank file, a dataset that does not match its
  // pickle, ...).
  static std::shared_ptr<const Snapshot> open(const std::string& path,
                                              const std::optional<std::string>& tag = {});
  // nullptr when `path` is neither a snapshot folder nor a folder of snapshots.
  static std::shared_ptr<const Snapshot> open_if_snapshot(const std::string& path,
                                                          const std::optional<std::string>& tag = {});
  ~Snapshot();

  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return manifest_.dir; }

  // The DeepSpeed files the snapshot stands for, as a tag folder would list them. abs_path is
  // "<snapshot>/<rank file>:/files/<name>", which open_file() understands and error messages show.
  std::vector<deepspeed::CheckpointFile> checkpoint_files() const;
  // One of them as a torch file: its pickle read by the safe unpickler, its storages mapped from the rank
  // file (repacked, chunked or compressed datasets are read into memory instead). Thread-safe.
  TorchFile open_file(const std::string& abs_path) const;

  // Gradients recorded by dump(grads=True): this rank's partition of flat group `group` (same length and
  // order as its fp32 partition), nullopt when none was recorded.
  std::optional<GradTensor> partition_grad(int rank, int group) const;
  std::vector<int> partition_grad_groups(int rank) const;
  // Per-param 16-bit gradients (param.grad where it existed at the dump).
  std::vector<std::pair<std::string, GradTensor>> lp_grads(int rank) const;

  struct RankFile;  // internal

 private:
  Snapshot() = default;
  Manifest manifest_;
  std::vector<std::shared_ptr<const RankFile>> rank_files_;              // by rank; null when unreadable
  std::map<std::string, std::pair<ErrorKind, std::string>> unreadable_;  // rank file name -> why
  const RankFile& rank_file(const std::string& file_name) const;
};

// "<dir>/<rank file>:/files/<name>" for a DeepSpeed file held in a snapshot's rank file.
std::string virtual_path(const std::string& dir, const std::string& rank_file, const std::string& name);

}  // namespace ckptdoc::snapshot
