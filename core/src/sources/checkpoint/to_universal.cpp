// convert_to_universal: a rigid ZeRO-1/2 or BF16_Optimizer checkpoint, data-, tensor- or pipeline-parallel,
// into the folder DeepSpeed's ds_to_universal.py writes (§7.1, §7.2), streamed param by param from the mapped
// rank files: each state file's tensor is produced from the fragments every rank holds, its tensor-parallel
// slices merged on the way (merged_param.h), so memory stays at a few chunk buffers.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/model/catalog.h"
#include "ckptdoc/parallel.h"
#include "ckptdoc/sources/checkpoint/convert.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "format/tensor_pages.h"
#include "sources/checkpoint/merged_param.h"
#include "sources/checkpoint/output_folder.h"
#include "sources/checkpoint/tp_patterns.h"
#include "sources/checkpoint/zero3_universal.h"
#include "sources/deepspeed/universal_folder.h"
#include "sources/deepspeed/value_access.h"

namespace fs = std::filesystem;

namespace ckptdoc::universal {

using deepspeed::Checkpoint;
using deepspeed::OptimizerWrapper;
using deepspeed::detail::dict_get;
using deepspeed::detail::int_key;
using deepspeed::detail::opt_int;

namespace {

constexpr int64_t kChunk = int64_t{1} << 20;
constexpr std::array<const char*, detail::kStateCount> kStates = {"fp32", "exp_avg", "exp_avg_sq"};

std::string num(int64_t v) {
  return std::to_string(v);
}

using detail::MergedParam;
using detail::MergeKind;
using detail::Run;
using detail::SlicePart;

// One model-parallel rank of the job (pipeline stage x tensor rank; the whole job when data-parallel).
struct Slice {
  std::shared_ptr<const Checkpoint> ckpt;
  detail::SlicePartitions parts;
  std::vector<const Value*> group_step;  // dp rank 0's state['step'] of each group (nullptr: none)
  std::vector<int64_t> group_adam_step;
};

// A param of the output: its merged tensor, and the slice its step and flags come from (tensor rank 0's).
struct SourceParam {
  MergedParam merged;
  size_t slice = 0;
  int group = 0;       // in that slice
  int first_rank = 0;  // lowest dp rank holding it there
};

[[noreturn]] void refuse(ErrorKind kind, const model::Catalog& cat, const std::string& why) {
  throw Error(kind, cat.tag_dir, "", why);
}

// The optimizer state entry of group g on a rank (rigid base_optimizer_state; ZeRO-3: the torch optimizer's
// state of sub-group g), or nullptr.
const Value* state_entry(const Checkpoint& ckpt, int rank, int group) {
  if (ckpt.catalog().wrapper == OptimizerWrapper::Zero3)
    return int_key(dict_get(dict_get(&ckpt.optimizer_state(rank), "optimizer_state_dict"), "state"), group);
  const Value* bos = dict_get(&ckpt.optimizer_state(rank), "base_optimizer_state");
  return int_key(dict_get(bos, "state"), group);
}

class ToUniversal {
 public:
  ToUniversal(const Checkpoint& ckpt, const ToUniversalOptions& o, Progress* progress, FileIo& io)
      : ckpt_(ckpt),
        cat_(ckpt.catalog()),
        opt_(o),
        progress_(progress),
        caller_io_(io),
        zero3_(cat_.wrapper == OptimizerWrapper::Zero3) {}

  ConvertResult run(const std::string& output) {
    check_input();
    target_ = target_version(opt_.for_deepspeed.empty() ? cat_.ds_version : opt_.for_deepspeed);
    if (zero3_) detail::check_zero3_input(ckpt_, target_);
    result_.target = "universal";
    const auto checked = detail::checked_output(output, cat_.save_dir, cat_.tag_dir, opt_.force);
    result_.output = checked.path;
    result_.tag = opt_.tag.empty() ? cat_.tag + "_universal" : opt_.tag;
    if (result_.tag.find('/') != std::string::npos || result_.tag == "." || result_.tag == "..")
      throw Error(ErrorKind::PathEscape, "", "--tag", "a folder name, not a path: '" + result_.tag + "'");
    open_slices();
    map_partitions();
    collect_params();
    step_files_ = !zero3_ && (!uci_ || target_.loader == LoaderKind::StepFiles);
    read_steps();
    if (!zero3_) decide_model_file();
    for (const auto& c : target_.caveats) result_.notes.push_back(c);
    if (zero3_)
      for (auto& n : detail::zero3_load_notes(ckpt_)) result_.notes.push_back(std::move(n));
    result_.notes.push_back(std::string("load it with engine.load_checkpoint(\"") + result_.output +
                            "\") and \"checkpoint\": {\"load_universal\": true} in the DeepSpeed config, at "
                            "any data-parallel size" +
                            std::string(cat_.topology.tp > 1 ? " and any tensor-parallel size whose slices "
                                                               "divide the merged params"
                                                             : ""));
    const auto t0 = std::chrono::steady_clock::now();
    detail::publish_folder(
        checked, caller_io_,
        [this](const std::string& dir, FileIo& io) {
          io_ = &io;
          write_all(dir);
        },
        progress_);
    const auto t1 = std::chrono::steady_clock::now();
    verify();
    result_.write_seconds = std::chrono::duration<double>(t1 - t0).count();
    result_.verify_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    return result_;
  }

 private:
  const Checkpoint& ckpt_;
  const deepspeed::Catalog& cat_;
  const ToUniversalOptions& opt_;
  Progress* progress_;
  FileIo& caller_io_;
  // ZeRO-3 (zero3_universal.h): bare flat tensors, no step.pt, the step and hyper-parameters in rank 0's
  // whole optimizer state, the model files copied as they are.
  const bool zero3_;
  FileIo* io_ = nullptr;  // while writing: the output folder's (its fsyncs are made at publishing)
  TargetVersion target_;
  ConvertResult result_;
  std::vector<Slice> slices_;  // by mp rank
  std::vector<SourceParam> params_;
  const Value* uci_ = nullptr;
  std::optional<int64_t> add_iteration_;  // the model file gets `iteration` = this
  // step.pt files and optimizer_state.pt['param_groups'] (what 0.14.1+ read): for a 0.14.1+ target, and for
  // every plain checkpoint, whose output then loads with both loader generations (0.12.3-0.14.0 ignore them).
  bool step_files_ = true;
  std::mutex compare_mutex_;
  std::vector<std::string> compare_failures_;  // from reading each state file back (write_state)
  std::atomic<uint64_t> bytes_{0};
  std::atomic<size_t> files_{0};

  void check_input() {
    if (cat_.universal)
      refuse(ErrorKind::InvalidRequest, cat_,
             "this is already a universal checkpoint (convert it --to zero for rigid ZeRO files)");
    if (cat_.wrapper != OptimizerWrapper::Zero12 && cat_.wrapper != OptimizerWrapper::BF16Optimizer &&
        !zero3_)
      refuse(ErrorKind::Unsupported, cat_,
             "a universal checkpoint is made from partitioned ZeRO-1/2/3 or BF16_Optimizer optimizer files; "
             "this checkpoint's optimizer is " +
                 std::string(deepspeed::wrapper_name(cat_.wrapper)));
    if (cat_.autoep)
      refuse(ErrorKind::Unsupported, cat_,
             "AutoEP ZeRO-3 checkpoints are not converted to universal by ckptdoc (its universal files need "
             "DeepSpeed's expert metadata); DeepSpeed 0.19's ds_to_universal.py converts them");
    if (cat_.topology.moe())
      refuse(ErrorKind::Unsupported, cat_,
             "mixture-of-experts checkpoints are not converted to universal (DeepSpeed's ds_to_universal.py "
             "and universal loader do not handle expert groups either)");
    std::string errors;
    for (const auto& p : cat_.problems)
      if (p.severity == model::Severity::Error) errors += "\n  " + p.code + ": " + p.message;
    if (!errors.empty())
      refuse(ErrorKind::Inconsistent, cat_,
             "the checkpoint has problems a conversion cannot work around:" + errors);
    if (cat_.groups.empty()) refuse(ErrorKind::Unsupported, cat_, "no param groups could be laid out");
    const Value* bos = dict_get(&ckpt_.optimizer_state(0), "base_optimizer_state");
    if (bos && bos->is_sequence())
      refuse(ErrorKind::Unsupported, cat_,
             "elastic (list) optimizer state (elastic_checkpoint: true) is not converted yet");
  }

  void open_slices() {
    for (int m = 0; m < ckpt_.slice_count(); ++m) {
      Slice sl;
      sl.ckpt = ckpt_.slice(m);
      if (sl.ckpt->catalog().groups.empty())
        refuse(ErrorKind::Unsupported, cat_,
               sl.ckpt->catalog().slice_label() + ": no param groups could be laid out");
      slices_.push_back(std::move(sl));
    }
  }

  void map_partitions() {
    bool any_moment = false, all_moments = true;
    for (auto& sl : slices_) {
      const auto& cat = sl.ckpt->catalog();
      const size_t dp = cat.groups.front().partitions.size();
      sl.parts.data.assign(cat.groups.size(), std::vector<std::array<const float*, kStates.size()>>(dp));
      sl.parts.keep.assign(cat.groups.size(), std::vector<std::array<Tensor, kStates.size()>>(dp));
      const std::string label = cat.slice_label().empty() ? "" : cat.slice_label() + ", ";
      for (const auto& g : cat.groups) {
        for (const auto& rp : g.partitions) {
          int64_t need = 0;
          for (const auto& f : rp.fragments) need = std::max(need, f.partition_offset + f.numel);
          for (size_t s = 0; s < kStates.size(); ++s) {
            const std::string where = label + "group " + num(g.index) + ", dp rank " + num(rp.rank);
            std::optional<Tensor> t = s == 0 ? sl.ckpt->fp32_partition(g.index, rp.rank)
                                             : sl.ckpt->moment_partition(g.index, rp.rank, kStates[s]);
            if (!t) {
              if (s == 0)
                refuse(ErrorKind::NotFound, cat_,
                       where + ": the fp32 master partition is missing or unreadable");
              all_moments = false;
              continue;
            }
            any_moment = any_moment || s > 0;
            if (t->dtype != DType::F32 || !t->is_contiguous())
              refuse(ErrorKind::Unsupported, cat_,
                     where + ": " + kStates[s] + " is " + std::string(dtype_name(t->dtype)) +
                         (t->is_contiguous() ? "" : " and not contiguous") +
                         "; only float32 state is converted");
            if (t->numel() < need)
              refuse(ErrorKind::Inconsistent, cat_,
                     where + ": " + kStates[s] + " " +
                         expected_found("at least " + num(need) + " elements", num(t->numel())));
            auto& slot = sl.parts.keep[static_cast<size_t>(g.index)][static_cast<size_t>(rp.rank)][s];
            slot = *t;
            sl.parts.data[static_cast<size_t>(g.index)][static_cast<size_t>(rp.rank)][s] =
                reinterpret_cast<const float*>(slot.contiguous_bytes().data());
          }
        }
      }
    }
    if (!any_moment)
      refuse(ErrorKind::Unsupported, cat_,
             "the optimizer state is empty (no exp_avg/exp_avg_sq: a fresh or reset optimizer). A universal "
             "checkpoint carries Adam's moments, which DeepSpeed's loader requires; load this checkpoint as "
             "it is "
             "(load_optimizer_states=False) at the new world size instead");
    if (!all_moments)
      refuse(ErrorKind::Inconsistent, cat_,
             "exp_avg/exp_avg_sq are missing on some ranks or groups; only Adam-style optimizer state (both "
             "moments everywhere) can be converted");
    for (const auto& k : cat_.optimizer_state_keys)
      if (k != "exp_avg" && k != "exp_avg_sq")
        result_.notes.push_back("optimizer state '" + k +
                                "' is not carried over: DeepSpeed's converter writes only "
                                "fp32, exp_avg, exp_avg_sq (and step)");
  }

  // Param `index` of group `group` in slice m, with its runs over the dp ranks.
  SlicePart slice_part(size_t m, const deepspeed::GroupLayout& g, size_t index,
                       const std::string& name) const {
    SlicePart part;
    part.partitions = &slices_[m].parts;
    part.group = g.index;
    part.shape = g.params[index].shape;
    part.numel = g.params[index].numel;
    for (const auto& rp : g.partitions)
      for (const auto& f : rp.fragments)
        if (f.param == static_cast<int>(index))
          part.runs.push_back({rp.rank, f.param_offset, f.partition_offset, f.numel});
    std::sort(part.runs.begin(), part.runs.end(),
              [](const Run& a, const Run& b) { return a.param_offset < b.param_offset; });
    int64_t covered = 0;
    const std::string where = slices_[m].ckpt->catalog().slice_label();
    for (const auto& r : part.runs) {
      if (r.param_offset != covered)
        refuse(ErrorKind::Corrupt, cat_,
               "param '" + name + "'" + (where.empty() ? "" : " (" + where + ")") +
                   ": its fragments leave a gap");
      covered += r.numel;
    }
    if (covered != part.numel)
      refuse(ErrorKind::Corrupt, cat_,
             "param '" + name + "'" + (where.empty() ? "" : " (" + where + ")") +
                 ": its fragments do not cover it");
    return part;
  }

  // Every pipeline stage's params (a stage's tensor rank 0 names them), each with its slice on every tensor
  // rank.
  void collect_params() {
    // ds_to_universal's ZeRO-3 path at tp 1 merges no slices: universal_checkpoint_info plays no part.
    uci_ = zero3_ ? nullptr : dict_get(&ckpt_.model_file(0, 0).root, "universal_checkpoint_info");
    const auto& topo = cat_.topology;
    if (topo.tp > 1 && !uci_)
      refuse(ErrorKind::Unsupported, cat_,
             "a tensor-parallel checkpoint (tp " + num(topo.tp) +
                 ") without universal_checkpoint_info: how its slices merge (replicated, row- or "
                 "column-parallel, vocabulary padding) is not recorded, so it cannot be written as whole "
                 "params. Megatron-DeepSpeed saves it as client state; DeepSpeed's ds_to_universal.py "
                 "refuses such a checkpoint too");
    detail::TpPatterns patterns(uci_);
    std::set<std::string> seen;
    for (int stage = 0; stage < std::max(topo.pp, 1); ++stage) {
      const size_t first = static_cast<size_t>(stage * std::max(topo.tp, 1));
      const auto& cat0 = slices_[first].ckpt->catalog();
      for (const auto& g : cat0.groups) {
        for (size_t i = 0; i < g.params.size(); ++i) {
          SourceParam p;
          MergedParam& mp = p.merged;
          mp.name = g.params[i].name;
          if (mp.name.empty() || mp.name.find('/') != std::string::npos || mp.name == "." || mp.name == "..")
            refuse(ErrorKind::Unsupported, cat_, "param name '" + mp.name + "' cannot be a folder name");
          if (!seen.insert(mp.name).second) {
            if (uci_ && patterns.pipeline_replicated(mp.name))
              continue;  // ds_to_universal: the first stage's
            refuse(ErrorKind::Unsupported, cat_,
                   "param '" + mp.name +
                       "' is saved by more than one pipeline stage, and "
                       "universal_checkpoint_info's pipeline_replicated_parameter_patterns does not name it");
          }
          p.slice = first;
          p.group = g.index;
          mp.parts.push_back(slice_part(first, g, i, mp.name));
          for (int k = 1; k < topo.tp; ++k) {
            const size_t m = first + static_cast<size_t>(k);
            const auto& cat = slices_[m].ckpt->catalog();
            const auto at = cat.find_param(mp.name);
            if (!at)
              refuse(ErrorKind::Inconsistent, cat_,
                     "param '" + mp.name + "' is on tensor rank 0 of stage " + num(stage) +
                         " but not on tensor rank " + num(k));
            mp.parts.push_back(slice_part(m, cat.groups[static_cast<size_t>(at->first)],
                                          static_cast<size_t>(at->second), mp.name));
          }
          p.first_rank = mp.parts.front().runs.front().rank;
          mp.merge = patterns.merge_for(mp.name);
          if (const std::string why = mp.plan(); !why.empty())
            refuse(ErrorKind::Unsupported, cat_, "param '" + mp.name + "': " + why);
          if (zero3_) mp.out_shape = {mp.out_numel};  // ZeRO-3's converter writes the flat partitions joined
          params_.push_back(std::move(p));
        }
      }
    }
    check_replicated();
    for (const auto& u : patterns.unmatched())
      result_.notes.push_back("universal_checkpoint_info pattern '" + u +
                              "' matches no param (DeepSpeed's "
                              "ds_to_universal.py refuses that unless --no_strict)");
    if (!uci_ && !zero3_)
      result_.assumptions.push_back(
          "the checkpoint has no universal_checkpoint_info (a plain DeepSpeed job's): assumed a "
          "data-parallel model "
          "without tensor-parallel patterns or vocabulary padding, so every param is stored whole with "
          "cat_dim 0; "
          "written with what every universal loader since DeepSpeed 0.12.3 reads (iteration, step.pt, "
          "param_groups)");
  }

  void read_steps() {
    for (auto& sl : slices_) {
      const Checkpoint& c = *sl.ckpt;
      const std::string label = c.catalog().slice_label().empty() ? "" : c.catalog().slice_label() + ", ";
      for (const auto& g : c.catalog().groups) {
        const Value* e = state_entry(c, 0, g.index);
        const Value* s = dict_get(e, "step");
        if (!s)
          s = dict_get(deepspeed::detail::list_at(
                           dict_get(dict_get(&c.optimizer_state(0), "base_optimizer_state"), "param_groups"),
                           static_cast<size_t>(g.index)),
                       "step");  // FusedAdam keeps it in the param group
        const auto v = s ? deepspeed::step_of(*s) : std::nullopt;
        if (!v || !(*v >= 1 && *v <= 9.0e15))
          refuse(ErrorKind::Corrupt, cat_,
                 label + "group " + num(g.index) + ": no usable Adam step in dp rank 0's optimizer state");
        sl.group_step.push_back(dict_get(e, "step"));
        sl.group_adam_step.push_back(static_cast<int64_t>(*v));
      }
    }
    const int64_t first = slices_.front().group_adam_step.front();
    for (const auto& sl : slices_)
      for (const int64_t step : sl.group_adam_step)
        if (step != first) {
          result_.notes.push_back("optimizer groups are at different Adam steps (" + num(first) + ", " +
                                  num(step) + ")" +
                                  (target_.loader == LoaderKind::Iteration
                                       ? ": DeepSpeed " + target_.version + " gives every group iteration + 1"
                                       : ""));
          return;
        }
  }

  // ds_to_universal.py asserts that a tensor-parallel replicated param is equal on every tensor rank.
  void check_replicated() const {
    std::vector<float> a(static_cast<size_t>(kChunk)), b(static_cast<size_t>(kChunk));
    for (const auto& p : params_) {
      const MergedParam& mp = p.merged;
      if (mp.merge.kind != MergeKind::Replicated || mp.parts.size() < 2) continue;
      for (size_t s = 0; s < kStates.size(); ++s)
        for (int64_t first = 0; first < mp.parts[0].numel; first += kChunk) {
          const int64_t n = std::min(kChunk, mp.parts[0].numel - first);
          mp.fill_part(0, s, first, n, a.data());
          for (size_t k = 1; k < mp.parts.size(); ++k) {
            mp.fill_part(k, s, first, n, b.data());
            if (std::memcmp(a.data(), b.data(), static_cast<size_t>(n) * sizeof(float)) != 0)
              refuse(ErrorKind::Inconsistent, cat_,
                     "param '" + mp.name + "' is tensor-parallel replicated (" +
                         "tp_replicated_parameter_patterns) but its " + kStates[s] +
                         " differs between tensor ranks 0 and " + num(static_cast<int64_t>(k)) +
                         " near element " + num(first) +
                         " (DeepSpeed's ds_to_universal.py refuses it too): run ckptdoc diagnose");
          }
        }
    }
  }

  // `iteration` (Megatron's key) is what DeepSpeed 0.12.3-0.14.0 turn into the step. A model file without it
  // gets iteration = Adam step - 1, unless it carries universal_checkpoint_info for a 0.14.1+ target (then it
  // is copied as ds_to_universal.py copies it).
  void decide_model_file() {
    const Value& root = ckpt_.model_file(0, 0).root;
    const auto it = opt_int(dict_get(&root, "iteration"));
    const int64_t step = slices_.front().group_adam_step.front();
    if (it) {
      if (*it + 1 != step)
        result_.notes.push_back(
            "the model file's iteration is " + num(*it) + " but the saved Adam step is " + num(step) +
            (target_.loader == LoaderKind::Iteration
                 ? ": DeepSpeed " + target_.version + " will resume Adam at step " + num(*it + 1) +
                       " (the iteration is kept: the training loop may rely on it)"
                 : " (DeepSpeed 0.14.1+ take the step from step.pt)"));
      return;
    }
    if (uci_ && target_.loader == LoaderKind::StepFiles) {
      result_.notes.push_back(
          "no `iteration` in the model file: DeepSpeed 0.12.3-0.14.0 could not load this "
          "output (0.14.1+ take the step from step.pt)");
      return;
    }
    add_iteration_ = step - 1;
    result_.assumptions.push_back(
        "the model file has no `iteration` (Megatron's key, which DeepSpeed 0.12.3-0.14.0 "
        "turn into Adam's step as iteration + 1): wrote iteration = " +
        num(step - 1) + " so that the step resumes at the saved Adam step " + num(step) + " (global_steps " +
        num(cat_.global_steps) + " also counts skipped fp16 steps)");
  }

  // ---- writing
  // ------------------------------------------------------------------------------------------------

  void write_file(const std::string& path, const Value& root, uint64_t bytes) {
    deepspeed::write_checkpoint_file(path, root, *io_);
    bytes_ += bytes;
    ++files_;
    if (progress_) progress_->add(bytes);
  }

  // One file of param p: its state s (with step.pt beside the fp32 master). Its folder exists.
  void write_state(const std::string& zero_dir, const SourceParam& p, size_t s) {
    const MergedParam& mp = p.merged;
    const Slice& sl = slices_[p.slice];
    const std::string folder = zero_dir + "/" + mp.name;
    if (s == 0 && step_files_ && sl.group_step[static_cast<size_t>(p.group)]) {
      // ds_to_universal 0.14.1+ saves the step value of the lowest dp rank holding the param, as saved.
      const Value* st = dict_get(state_entry(*sl.ckpt, p.first_rank, p.group), "step");
      if (!st) st = sl.group_step[static_cast<size_t>(p.group)];
      write_file(folder + "/step.pt", st->clone(), 4);
    }
    Value d = Value::dict();
    switch (mp.merge.kind) {
      case MergeKind::CatDim:
        d.set("cat_dim", Value::integer(mp.merge.cat_dim));
        break;
      case MergeKind::TwoSubParams:
        d.set("cat_dim", Value::integer(0));
        d.set("param_n_sub_params", Value::integer(2));
        break;
      case MergeKind::Replicated:
      case MergeKind::Average:
        break;
    }
    if (mp.merge.vocab) d.set("vocab_tensor", Value::boolean(true));
    auto st = std::make_shared<Storage>();
    st->dtype = DType::F32;
    st->numel = static_cast<uint64_t>(mp.out_numel);
    Progress* progress = progress_;
    st->producer = [&mp, s, progress](ByteSink& sink) {
      mp.write(s, sink, [progress] {
        if (progress) progress->check();
      });
    };
    Tensor t;
    t.dtype = DType::F32;
    t.shape = mp.out_shape;
    t.strides = Tensor::contiguous_strides(mp.out_shape);
    t.storage = std::move(st);
    t.requires_grad =
        sl.parts.keep[static_cast<size_t>(p.group)][static_cast<size_t>(p.first_rank)][s].requires_grad;
    const uint64_t bytes = static_cast<uint64_t>(mp.out_numel) * 4;
    if (zero3_) {
      write_file(folder + "/" + kStates[s] + ".pt", Value::tensor(std::move(t)), bytes);
    } else {
      d.set("param", Value::tensor(std::move(t)));
      write_file(folder + "/" + kStates[s] + ".pt", d, bytes);
    }
    // Read back at once, while other threads write: the comparison overlaps their I/O.
    if (auto why = compare_written(zero_dir, mp, s)) {
      std::lock_guard<std::mutex> lock(compare_mutex_);
      compare_failures_.push_back(std::move(*why));
    }
  }

  // The written state file of mp re-opened: a float32 tensor of the merged shape, equal bit for bit to the
  // merged source values. nullopt when it is; else what is wrong.
  std::optional<std::string> compare_written(const std::string& zero_dir, const MergedParam& mp,
                                             size_t s) const {
    const std::string rel = "zero/" + mp.name + "/" + kStates[s] + ".pt";
    const TorchFile f = TorchFile::open(deepspeed::state_file(zero_dir, mp.name, kStates[s]));
    const Value* v = zero3_ ? &f.root : dict_get(&f.root, "param");
    if (!v || !v->is_tensor() || v->as_tensor().shape != mp.out_shape || v->as_tensor().dtype != DType::F32 ||
        !v->as_tensor().is_contiguous())
      return rel + " does not hold a float32 tensor of the expected shape";
    std::vector<float> a(static_cast<size_t>(std::min(kChunk, mp.out_numel)));
    const float* w = reinterpret_cast<const float*>(v->as_tensor().contiguous_bytes().data());
    for (int64_t first = 0; first < mp.out_numel; first += kChunk) {
      const int64_t n = std::min(kChunk, mp.out_numel - first);
      mp.fill(s, first, n, a.data());
      if (std::memcmp(a.data(), w + first, static_cast<size_t>(n) * 4) != 0)
        return rel + " differs from the source near element " + num(first);
      release_pages(v->as_tensor(), first, n);
    }
    return std::nullopt;
  }

  Value optimizer_state_root() const {
    const Value& osd = ckpt_.optimizer_state(0);
    Value out = Value::dict();
    for (const auto& [k, v] : osd.as_dict().items) {
      if (k.is(Value::Kind::Str) &&
          (k.as_str() == "base_optimizer_state" || k.as_str() == "param_slice_mappings" ||
           k.as_str() == "single_partition_of_fp32_groups"))
        continue;
      out.set_item(k.clone(), v.clone());
    }
    // DeepSpeedCheckpoint's state of rank 0 after _update_partition_count / _clear_group_paddings.
    if (const Value* pads = out.get("group_paddings"); pads && pads->is_sequence() && !pads->items().empty())
      out.set("group_paddings", Value::list(std::vector<Value>(pads->items().size(), Value::integer(0))));
    if (const Value* pc = out.get("partition_count"); pc && pc->is_sequence() && !pc->items().empty())
      out.set(
          "partition_count",
          Value::list(std::vector<Value>(
              pc->items().size(), Value::integer(static_cast<int64_t>(
                                      slices_.front().ckpt->catalog().groups.front().partitions.size())))));
    if (step_files_) {
      const Value* pg = dict_get(dict_get(&osd, "base_optimizer_state"), "param_groups");
      if (!pg) refuse(ErrorKind::Corrupt, cat_, "rank 0's base_optimizer_state has no param_groups");
      out.set("param_groups", pg->clone());
    }
    return out;
  }

  // What 0.19's ds_to_universal.py adds after merging: every module state-dict entry of the model files
  // without a folder yet (buffers, frozen params) as zero/<name>/fp32.pt = {'param': value.float()}, the
  // first model file's value where several hold it. No loader reads them; written so the folder equals that
  // converter's.
  void write_module_entries(const std::string& zero_dir) {
    std::set<std::string> done;
    for (const auto& p : params_) done.insert(p.merged.name);
    for (const auto& f : cat_.files) {
      if (f.role != deepspeed::FileRole::Model || f.path.rfind("mp", 0) != 0 ||
          f.path.find('/') != std::string::npos)
        continue;
      const Value* module = dict_get(&ckpt_.model_file(f.mp_rank, 0).root, "module");
      for (const auto& [name, v] : deepspeed::detail::str_items(module)) {
        if (!v->is_tensor() || done.contains(name)) continue;
        if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
          refuse(ErrorKind::Unsupported, cat_, "module entry '" + name + "' cannot be a folder name");
        done.insert(name);
        const Tensor& src = v->as_tensor();
        const std::vector<float> values = src.to_float();
        std::vector<uint8_t> bytes(values.size() * sizeof(float));
        std::memcpy(bytes.data(), values.data(), bytes.size());
        Value d = Value::dict();
        d.set("param", Value::tensor(Tensor::from_bytes(DType::F32, src.shape, std::move(bytes))));
        std::string folder = zero_dir;
        folder.append("/").append(name);
        detail::make_dir(*io_, folder);
        write_file(folder.append("/fp32.pt"), d, values.size() * sizeof(float));
      }
    }
  }

  void write_all(const std::string& out_dir) {
    const std::string tag_dir = out_dir + "/" + result_.tag;
    const std::string zero_dir = tag_dir + "/zero";
    detail::make_dir(*io_, tag_dir);
    detail::make_dir(*io_, zero_dir);
    uint64_t total = 0;
    for (const auto& p : params_) total += static_cast<uint64_t>(p.merged.out_numel) * 12;
    if (progress_) progress_->set_stage("writing universal checkpoint", total);

    // Files in parallel, largest first: each thread writes one state file at a time straight from the mapped
    // partitions, and several files in flight overlap their writes and fsyncs.
    for (const auto& p : params_) detail::make_dir(*io_, zero_dir + "/" + p.merged.name);
    std::vector<std::pair<size_t, size_t>> tasks;  // (param, state)
    for (size_t i = 0; i < params_.size(); ++i)
      for (size_t st = 0; st < kStates.size(); ++st) tasks.emplace_back(i, st);
    std::stable_sort(tasks.begin(), tasks.end(), [this](const auto& a, const auto& b) {
      return params_[a.first].merged.out_numel > params_[b.first].merged.out_numel;
    });
    const unsigned threads = std::clamp<unsigned>(opt_.threads ? opt_.threads : 4, 1, 16);
    parallel_for(tasks.size(), threads, [&](size_t i, unsigned) {
      write_state(zero_dir, params_[tasks[i].first], tasks[i].second);
    });
    result_.params = params_.size();

    if (target_.module_entries && !zero3_) write_module_entries(zero_dir);
    write_file(zero_dir + "/optimizer_state.pt",
               zero3_ ? detail::zero3_optimizer_state_root(ckpt_) : optimizer_state_root(), 0);
    // ds_to_universal.py copies every mp* file of the tag folder (ZeRO-3: every *model_states.pt file).
    for (const auto& f : cat_.files) {
      if (f.path.find('/') != std::string::npos) continue;
      if (zero3_ ? f.role != deepspeed::FileRole::Model || !f.path.ends_with("model_states.pt")
                 : f.path.rfind("mp", 0) != 0)
        continue;
      if (add_iteration_ && f.role == deepspeed::FileRole::Model) {
        Value root = ckpt_.model_file(f.mp_rank, 0).root.clone();
        root.set("iteration", Value::integer(*add_iteration_));
        write_file(tag_dir + "/" + f.path, root, f.bytes);
      } else {
        deepspeed::copy_file(f.abs_path, tag_dir + "/" + f.path, *io_);
        bytes_ += f.bytes;
        ++files_;
      }
    }
    if (const int e = io_->fsync_dir(zero_dir); e != 0)
      throw Error(ErrorKind::Io, zero_dir, "", "fsync of directory failed");
    if (const int e = io_->fsync_dir(tag_dir); e != 0)
      throw Error(ErrorKind::Io, tag_dir, "", "fsync of directory failed");
    deepspeed::write_text_file(out_dir + "/latest_universal", result_.tag, *io_);
    result_.bytes_written = bytes_;
    result_.files = files_ + 1;
  }

  // ---- verification
  // -------------------------------------------------------------------------------------------

  void verify() {
    auto& fail = result_.verify_failures;
    if (progress_) progress_->set_stage("verifying", 0);
    auto written = Checkpoint::open(result_.output);
    const auto& wc = written->catalog();
    if (!wc.universal) {
      fail.push_back("the output is not read back as a universal checkpoint");
      return;
    }
    if ((target_.loader == LoaderKind::Iteration || add_iteration_) && !wc.universal->loads_with_iteration())
      fail.push_back("the model file has no `iteration`, which DeepSpeed " + target_.version + " needs");
    if (step_files_ && !wc.universal->loads_with_step_files())
      fail.push_back("step.pt files or optimizer_state.pt['param_groups'] are missing, which DeepSpeed " +
                     target_.version + " needs");
    // Every written tensor equals what was read, element for element (bitwise), and the step resumes right.
    // Every state file was read back and compared with its source right after it was written (write_state).
    fail.insert(fail.end(), compare_failures_.begin(), compare_failures_.end());
    const int64_t step0 = slices_.front().group_adam_step.front();
    if (zero3_ && wc.universal->zero3_step != step0)
      fail.push_back("zero/optimizer_state.pt does not hold the saved Adam step " + num(step0) +
                     " where DeepSpeed's ZeRO-3 loader reads it");
    for (const auto& p : params_) {
      const MergedParam& mp = p.merged;
      const auto at = wc.find_param(mp.name);
      if (!at) {
        fail.push_back("zero/" + mp.name + "/ is not read back");
        continue;
      }
      const Slice& sl = slices_[p.slice];
      const int64_t want = sl.group_adam_step[static_cast<size_t>(p.group)];
      const auto& up = wc.universal->params[static_cast<size_t>(at->first)];
      if (step_files_ && sl.group_step[static_cast<size_t>(p.group)] && up.step != want)
        fail.push_back("zero/" + mp.name + "/step.pt does not hold the saved Adam step " + num(want));
      if (add_iteration_ && p.slice == 0 && p.group == 0 &&
          (!wc.universal->iteration || *wc.universal->iteration + 1 != want))
        fail.push_back("iteration + 1 is not the saved Adam step " + num(want));
    }
    // The values are the source's bit for bit, so a statistics pass would only repeat the source's diagnosis
    // (and map the whole output): the verification report holds what re-opening the output found.
    for (const auto& p : wc.problems) result_.verification.findings.push_back(p);
    std::stable_sort(
        result_.verification.findings.begin(), result_.verification.findings.end(),
        [](const analysis::Finding& a, const analysis::Finding& b) { return a.severity > b.severity; });
    result_.verification.backend = "re-read and compared bit for bit with the source";
  }
};

}  // namespace

ConvertResult convert_to_universal(const Checkpoint& ckpt, const std::string& output,
                                   const ToUniversalOptions& options, Progress* progress, FileIo& io) {
  return ToUniversal(ckpt, options, progress, io).run(output);
}

}  // namespace ckptdoc::universal
