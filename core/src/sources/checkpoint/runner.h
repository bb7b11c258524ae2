#pragma once
// The writer side of a repair: one Runner per run writes every file of the output folder through the
// injectable FileIo (AtomicFile each), one action at a time. The actions live in their own files
// (action_rewrite.cpp, action_repartition.cpp, action_graft.cpp); publishing and verifying the folder is
// shared by all of them (publish.h).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/compute/exchange.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/sources/deepspeed/layout.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "repair/publish.h"
#include "sources/checkpoint/distributed_repartition.h"
#include "sources/deepspeed/param_readers.h"

namespace ckptdoc::repair::detail {

using deepspeed::FloatFill;
using deepspeed::GroupLayout;
using deepspeed::detail::add_file_lp;
using deepspeed::detail::add_module_lp;
using deepspeed::detail::LpReader;
using deepspeed::detail::source_layout;
using deepspeed::detail::SourceLayout;

Value* need(Value* v, const char* key, const std::string& file);
void erase_group_steps(Value* param_groups);

// Fills flat elements [first, first+n) of a flat (or ZeRO-3 partition) layout from a per-param reader.
using ParamRead = std::function<void(const std::string& name, int64_t first, int64_t n, float* out)>;
void fill_zero12_flat(const deepspeed::GroupLayout& g, int64_t flat_first, int64_t n, float* out,
                      const ParamRead& read);
void fill_zero3_part(const deepspeed::GroupLayout& g, int rank, int dp, int64_t first, int64_t n, float* out,
                     const ParamRead& read);

class Runner {
 public:
  Runner(const deepspeed::Checkpoint& ckpt, const RepairRequest& rq, Plan& plan, Progress* progress,
         FileIo& io);
  // One Runner per model-parallel rank of a job (each writes its rank's files into the same folder; mp rank
  // 0's, run last, also `latest`). Under MPI: this process's share of a re-partition, and whether it writes
  // the files every storage needs once (model file, `latest`, extras): the first process on each storage
  // does.
  void distribute(const Assignment* assignment, Exchanger* exchanger, bool writes_shared_files) {
    dist_ = assignment;
    exchanger_ = exchanger;
    writes_shared_files_ = writes_shared_files;
  }
  uint64_t exchange_bytes() const { return exchange_bytes_; }
  DeviceKind backend_kind() const { return backend_->kind(); }

  void run(const std::string& out_dir);

 private:
  const deepspeed::Checkpoint& ckpt_;
  const deepspeed::Catalog& cat_;
  const RepairRequest& rq_;
  Plan& plan_;
  Progress* progress_;
  FileIo& io_;
  std::unique_ptr<Backend> backend_;
  std::string out_, tag_out_;
  const Assignment* dist_ = nullptr;
  Exchanger* exchanger_ = nullptr;
  bool writes_shared_files_ = true;
  uint64_t exchange_bytes_ = 0;
  const SourceLayout* src_ = nullptr;  // while repartition() runs

  void tick();
  deepspeed::FloatFill guarded(deepspeed::FloatFill f) const;
  void write(const std::string& name, const Value& root);
  void copy(const deepspeed::CheckpointFile& f);
  void copy_save_dir_extras();
  // The files this runner writes: its model-parallel rank's; files of no rank (and layers no stage owns) go
  // with mp rank 0.
  bool owns(const deepspeed::CheckpointFile& f) const;
  void copy_other_files();
  // Rebuilds a state entry (clone of `tmpl`) whose 1-D tensors of length `old_len` become `len`-long
  // tensors filled from `fill(key, ...)`.
  Value remap_state_entry(
      const Value& tmpl, int64_t old_len, int64_t len,
      const std::function<void(const std::string&, int64_t, int64_t, float*)>& fill) const;

  // refresh / reset / drop: same layout, same files (action_rewrite.cpp)
  void rewrite_in_layout();
  void restore_model_files();  // --restore-model-files (action_rewrite.cpp)
  void refresh_unfused_masters(Value& root, const std::string& path, const ParamRead& lp_read);
  void refresh_fused_masters(Value& root, const std::string& path, const ParamRead& lp_read);

  // repartition --world-size (action_repartition.cpp)
  std::vector<std::string> state_keys(const Value& entry, int64_t len) const;
  // The groups of the new layout (flat groups or ZeRO-3 sub-groups) with the same params in the same order.
  struct NewLayout {
    std::vector<GroupLayout> groups;
    std::vector<std::vector<Value>> sub_ids;  // ZeRO-3: new sub-group ids per param group
    std::vector<int> old_first_sub;           // ZeRO-3: an old sub-group of each new one (state template)
  };
  NewLayout new_layout(const SourceLayout& src, const TorchFile& optim_tmpl, int n) const;
  // MoE: how many expert-parallel instances the catalog lists for this group's file group.
  int expert_parallel_size(const GroupLayout& g) const;
  // param_slice_mappings of partition `part` of a new group, with experts under the local names files use.
  Value file_slice_mappings(const GroupLayout& g, int part) const;
  // The old optimizer state entry a new group's state is modelled on (nullptr when there is none).
  const Value* old_state_entry(const Value& osd, size_t gi, const NewLayout& nl, int64_t* old_len) const;
  // The model file the new files copy their metadata from: rank 0's, or under MPI one this process has.
  const TorchFile& model_template() const { return ckpt_.model_file(-1, dist_ ? dist_->template_rank : 0); }

  // Elements of `field` ("fp32" or a state key) of new rank r's partition of new group gi.
  using RankFill = std::function<FloatFill(size_t gi, int r, const std::string& field)>;
  // The optimizer file of new rank r: `tmpl` (an old rank's file) with every partition-shaped part rebuilt.
  Value repartitioned_optim_root(int r, int n, const TorchFile& tmpl, const NewLayout& nl,
                                 const RankFill& fill) const;
  // The fields each new group carries: the fp32 master and, unless the optimizer is reset, the
  // partition-shaped tensors of its old state entry (exp_avg, exp_avg_sq, ...).
  std::vector<std::vector<std::string>> group_fields(const TorchFile& tmpl, const NewLayout& nl) const;
  void repartition();

  // repartition --target: graft onto a template's layout (action_graft.cpp)
  void graft();
};

}  // namespace ckptdoc::repair::detail
