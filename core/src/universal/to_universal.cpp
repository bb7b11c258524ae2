// convert_to_universal: a rigid ZeRO-1/2 or BF16_Optimizer checkpoint into the folder DeepSpeed's
// ds_to_universal.py writes (§7.1, §7.2), streamed param by param from the mapped rank files: each state
// file's tensor is produced in chunks from the fragments every rank holds, so memory stays at a few chunk
// buffers.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/deepspeed/writer.h"
#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/universal/convert.h"
#include "deepspeed/value_access.h"
#include "universal/mapped_pages.h"
#include "universal/output_folder.h"
#include "universal/tp_patterns.h"
#include "universal/universal_folder.h"

namespace fs = std::filesystem;

namespace ckptdoc::universal {

using deepspeed::Checkpoint;
using deepspeed::OptimizerWrapper;
using deepspeed::detail::dict_get;
using deepspeed::detail::int_key;
using deepspeed::detail::opt_int;

namespace {

constexpr int64_t kChunk = int64_t{1} << 20;
constexpr std::array<const char*, 3> kStates = {"fp32", "exp_avg", "exp_avg_sq"};  // ds_to_universal's order

std::string num(int64_t v) {
  return std::to_string(v);
}

// One contiguous run of a param's elements in one rank's flat partition.
struct Run {
  int rank = 0;
  int64_t param_offset = 0, partition_offset = 0, numel = 0;
};

struct SourceParam {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int group = 0;
  std::vector<Run> runs;  // by param_offset, covering [0, numel)
  detail::ParamMerge merge;
  std::vector<int64_t> out_shape;  // shape written (vocabulary params lose their padded rows)
  int64_t out_numel = 0;
};

// The mapped partitions of every (group, rank): fp32 master and moments, checked to be float32, contiguous
// and long enough before anything is written.
struct Partitions {
  std::vector<std::vector<std::array<const float*, 3>>> data;  // [group][rank][state]
  std::vector<std::vector<std::array<int64_t, 3>>> length;
  std::vector<std::vector<std::array<Tensor, 3>>> keep;  // the views (keep the mappings alive)
};

[[noreturn]] void refuse(const deepspeed::Catalog& cat, const std::string& why) {
  throw Error(cat.tag_dir, "", why);
}

// Elements [first, first + n) of `state` of param p, from the runs of every rank. Average-merged params
// become Python's sum([t]) / 1, which turns -0.0 into +0.0.
void fill_param(const Partitions& parts, const SourceParam& p, size_t state, int64_t first, int64_t n,
                float* out) {
  int64_t done = 0;
  for (const Run& r : p.runs) {
    if (done >= n) break;
    const int64_t at = first + done;
    if (r.param_offset + r.numel <= at) continue;
    const int64_t in = at - r.param_offset;
    const int64_t take = std::min(n - done, r.numel - in);
    const float* src = parts.data[static_cast<size_t>(p.group)][static_cast<size_t>(r.rank)][state];
    std::memcpy(out + done, src + r.partition_offset + in, static_cast<size_t>(take) * sizeof(float));
    detail::release(parts.keep[static_cast<size_t>(p.group)][static_cast<size_t>(r.rank)][state],
                    r.partition_offset + in, take);
    done += take;
  }
  if (done != n) throw Error("", "param '" + p.name + "'", "its fragments do not cover it (layout error)");
  if (p.merge.kind == detail::MergeKind::Average)
    for (int64_t i = 0; i < n; ++i)
      if (out[i] == 0.0f) out[i] = 0.0f;
}

// The optimizer state entry of group g on a rank (rigid base_optimizer_state), or nullptr.
const Value* state_entry(const Checkpoint& ckpt, int rank, int group) {
  const Value* bos = dict_get(&ckpt.optimizer_state(rank), "base_optimizer_state");
  return int_key(dict_get(bos, "state"), group);
}

class ToUniversal {
 public:
  ToUniversal(const Checkpoint& ckpt, const ToUniversalOptions& o, Progress* progress, FileIo& io)
      : ckpt_(ckpt), cat_(ckpt.catalog()), opt_(o), progress_(progress), io_(io) {}

  ConvertResult run(const std::string& output) {
    check_input();
    target_ = target_version(opt_.for_deepspeed.empty() ? cat_.ds_version : opt_.for_deepspeed);
    result_.target = "universal";
    result_.output = detail::checked_output(output, cat_.save_dir, cat_.tag_dir, opt_.force);
    result_.tag = opt_.tag.empty() ? cat_.tag + "_universal" : opt_.tag;
    if (result_.tag.find('/') != std::string::npos || result_.tag == "." || result_.tag == "..")
      throw Error("", "--tag", "a folder name, not a path: '" + result_.tag + "'");
    map_partitions();
    collect_params();
    step_files_ = !uci_ || target_.loader == LoaderKind::StepFiles;
    read_steps();
    decide_model_file();
    for (const auto& c : target_.caveats) result_.notes.push_back(c);
    result_.notes.push_back(std::string("load it with engine.load_checkpoint(\"") + result_.output +
                            "\") and \"checkpoint\": {\"load_universal\": true} in the DeepSpeed config, at "
                            "any data-parallel size");
    const auto t0 = std::chrono::steady_clock::now();
    detail::publish_folder(result_.output, io_, [this](const std::string& dir) { write_all(dir); });
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
  FileIo& io_;
  TargetVersion target_;
  ConvertResult result_;
  Partitions parts_;
  std::vector<SourceParam> params_;
  std::vector<const Value*> group_step_;  // rank 0's state['step'] of each group (nullptr: none)
  std::vector<int64_t> group_adam_step_;
  const Value* uci_ = nullptr;
  std::optional<int64_t> add_iteration_;  // the model file gets `iteration` = this
  // step.pt files and optimizer_state.pt['param_groups'] (what 0.14.1+ read): for a 0.14.1+ target, and for
  // every plain checkpoint, whose output then loads with both loader generations (0.12.3-0.14.0 ignore them).
  bool step_files_ = true;
  std::atomic<uint64_t> bytes_{0};
  std::atomic<size_t> files_{0};

  void check_input() {
    if (cat_.universal)
      refuse(cat_, "this is already a universal checkpoint (convert it --to zero for rigid ZeRO files)");
    if (cat_.wrapper == OptimizerWrapper::Zero3)
      refuse(cat_,
             "ZeRO-3 checkpoints are not converted to universal by ckptdoc yet (DeepSpeed 0.14.5+'s "
             "ds_to_universal.py converts them)");
    if (cat_.wrapper != OptimizerWrapper::Zero12 && cat_.wrapper != OptimizerWrapper::BF16Optimizer)
      refuse(
          cat_,
          "a universal checkpoint is made from partitioned ZeRO-1/2 or BF16_Optimizer optimizer files; this "
          "checkpoint's optimizer is " +
              std::string(deepspeed::wrapper_name(cat_.wrapper)));
    if (cat_.mp_world_size > 1)
      refuse(cat_, "tensor/pipeline-parallel checkpoints (mp_world_size " + num(cat_.mp_world_size) +
                       ") are not converted by ckptdoc yet");
    std::string errors;
    for (const auto& p : cat_.problems)
      if (p.severity == "error") errors += "\n  " + p.code + ": " + p.message;
    if (!errors.empty())
      refuse(cat_, "the checkpoint has problems a conversion cannot work around:" + errors);
    if (cat_.groups.empty()) refuse(cat_, "no param groups could be laid out");
    const Value* bos = dict_get(&ckpt_.optimizer_state(0), "base_optimizer_state");
    if (bos && bos->is_sequence())
      refuse(cat_, "elastic (list) optimizer state (elastic_checkpoint: true) is not converted yet");
  }

  void map_partitions() {
    const size_t dp = cat_.groups.front().partitions.size();
    parts_.data.assign(cat_.groups.size(), std::vector<std::array<const float*, 3>>(dp));
    parts_.length.assign(cat_.groups.size(), std::vector<std::array<int64_t, 3>>(dp));
    parts_.keep.assign(cat_.groups.size(), std::vector<std::array<Tensor, 3>>(dp));
    bool any_moment = false, all_moments = true;
    for (const auto& g : cat_.groups) {
      for (const auto& rp : g.partitions) {
        int64_t need = 0;
        for (const auto& f : rp.fragments) need = std::max(need, f.partition_offset + f.numel);
        for (size_t s = 0; s < kStates.size(); ++s) {
          const std::string where = "group " + num(g.index) + ", dp rank " + num(rp.rank);
          std::optional<Tensor> t = s == 0 ? ckpt_.fp32_partition(g.index, rp.rank)
                                           : ckpt_.moment_partition(g.index, rp.rank, kStates[s]);
          if (!t) {
            if (s == 0) refuse(cat_, where + ": the fp32 master partition is missing or unreadable");
            all_moments = false;
            continue;
          }
          any_moment = any_moment || s > 0;
          if (t->dtype != DType::F32 || !t->is_contiguous())
            refuse(cat_, where + ": " + kStates[s] + " is " + std::string(dtype_name(t->dtype)) +
                             (t->is_contiguous() ? "" : " and not contiguous") +
                             "; only float32 state is converted");
          if (t->numel() < need)
            refuse(cat_, where + ": " + kStates[s] + " " +
                             expected_found("at least " + num(need) + " elements", num(t->numel())));
          auto& slot = parts_.keep[static_cast<size_t>(g.index)][static_cast<size_t>(rp.rank)][s];
          slot = *t;
          parts_.data[static_cast<size_t>(g.index)][static_cast<size_t>(rp.rank)][s] =
              reinterpret_cast<const float*>(slot.contiguous_bytes().data());
          parts_.length[static_cast<size_t>(g.index)][static_cast<size_t>(rp.rank)][s] = t->numel();
        }
      }
    }
    if (!any_moment)
      refuse(cat_,
             "the optimizer state is empty (no exp_avg/exp_avg_sq: a fresh or reset optimizer). A universal "
             "checkpoint carries Adam's moments, which DeepSpeed's loader requires; load this checkpoint as "
             "it is "
             "(load_optimizer_states=False) at the new world size instead");
    if (!all_moments)
      refuse(cat_,
             "exp_avg/exp_avg_sq are missing on some ranks or groups; only Adam-style optimizer state (both "
             "moments everywhere) can be converted");
    for (const auto& k : cat_.optimizer_state_keys)
      if (k != "exp_avg" && k != "exp_avg_sq")
        result_.notes.push_back("optimizer state '" + k +
                                "' is not carried over: DeepSpeed's converter writes only "
                                "fp32, exp_avg, exp_avg_sq (and step)");
  }

  void collect_params() {
    uci_ = dict_get(&ckpt_.model_file(0, 0).root, "universal_checkpoint_info");
    detail::TpPatterns patterns(uci_);
    for (const auto& g : cat_.groups) {
      for (size_t i = 0; i < g.params.size(); ++i) {
        SourceParam p;
        p.name = g.params[i].name;
        if (p.name.empty() || p.name.find('/') != std::string::npos || p.name == "." || p.name == "..")
          refuse(cat_, "param name '" + p.name + "' cannot be a folder name");
        p.shape = g.params[i].shape;
        p.numel = g.params[i].numel;
        p.group = g.index;
        for (const auto& rp : g.partitions)
          for (const auto& f : rp.fragments)
            if (f.param == static_cast<int>(i))
              p.runs.push_back({rp.rank, f.param_offset, f.partition_offset, f.numel});
        std::sort(p.runs.begin(), p.runs.end(),
                  [](const Run& a, const Run& b) { return a.param_offset < b.param_offset; });
        int64_t covered = 0;
        for (const auto& r : p.runs) {
          if (r.param_offset != covered) refuse(cat_, "param '" + p.name + "': its fragments leave a gap");
          covered += r.numel;
        }
        if (covered != p.numel) refuse(cat_, "param '" + p.name + "': its fragments do not cover it");
        p.merge = patterns.merge_for(p.name);
        p.out_shape = p.shape;
        if (p.merge.vocab) {
          if (p.shape.size() != 2) refuse(cat_, "vocabulary param '" + p.name + "' is not 2-D");
          p.out_shape[0] = std::min(p.shape[0], p.merge.vocab_rows);
        }
        p.out_numel = 1;
        for (auto d : p.out_shape) p.out_numel *= d;
        params_.push_back(std::move(p));
      }
    }
    for (const auto& u : patterns.unmatched())
      result_.notes.push_back("universal_checkpoint_info pattern '" + u +
                              "' matches no param (DeepSpeed's "
                              "ds_to_universal.py refuses that unless --no_strict)");
    if (!uci_)
      result_.assumptions.push_back(
          "the checkpoint has no universal_checkpoint_info (a plain DeepSpeed job's): assumed a "
          "data-parallel model "
          "without tensor-parallel patterns or vocabulary padding, so every param is stored whole with "
          "cat_dim 0; "
          "written with what every universal loader since DeepSpeed 0.12.3 reads (iteration, step.pt, "
          "param_groups)");
  }

  void read_steps() {
    for (const auto& g : cat_.groups) {
      const Value* e = state_entry(ckpt_, 0, g.index);
      const Value* s = dict_get(e, "step");
      if (!s)
        s = dict_get(
            deepspeed::detail::list_at(
                dict_get(dict_get(&ckpt_.optimizer_state(0), "base_optimizer_state"), "param_groups"),
                static_cast<size_t>(g.index)),
            "step");  // FusedAdam keeps it in the param group
      const auto v = s ? deepspeed::step_of(*s) : std::nullopt;
      if (!v || !(*v >= 1 && *v <= 9.0e15))
        refuse(cat_, "group " + num(g.index) + ": no usable Adam step in rank 0's optimizer state");
      group_step_.push_back(dict_get(e, "step"));
      group_adam_step_.push_back(static_cast<int64_t>(*v));
    }
    for (size_t g = 1; g < group_adam_step_.size(); ++g)
      if (group_adam_step_[g] != group_adam_step_[0])
        result_.notes.push_back("optimizer groups are at different Adam steps (" + num(group_adam_step_[0]) +
                                ", " + num(group_adam_step_[g]) + ")" +
                                (target_.loader == LoaderKind::Iteration
                                     ? ": DeepSpeed " + target_.version + " gives every group iteration + 1"
                                     : ""));
  }

  // `iteration` (Megatron's key) is what DeepSpeed 0.12.3-0.14.0 turn into the step. A model file without it
  // gets iteration = Adam step - 1, unless it carries universal_checkpoint_info for a 0.14.1+ target (then it
  // is copied as ds_to_universal.py copies it).
  void decide_model_file() {
    const Value& root = ckpt_.model_file(0, 0).root;
    const auto it = opt_int(dict_get(&root, "iteration"));
    const int64_t step = group_adam_step_.front();
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
    deepspeed::write_checkpoint_file(path, root, io_);
    bytes_ += bytes;
    ++files_;
    if (progress_) progress_->add(bytes);
  }

  // One file of param p: its state s (with step.pt beside the fp32 master). Its folder exists.
  void write_state(const std::string& zero_dir, const SourceParam& p, size_t s) {
    const std::string folder = zero_dir + "/" + p.name;
    if (s == 0 && step_files_ && group_step_[static_cast<size_t>(p.group)]) {
      // ds_to_universal 0.14.1+ saves the step value of the lowest dp rank holding the param, as saved.
      const Value* st = dict_get(state_entry(ckpt_, p.runs.front().rank, p.group), "step");
      if (!st) st = group_step_[static_cast<size_t>(p.group)];
      write_file(folder + "/step.pt", st->clone(), 4);
    }
    Value d = Value::dict();
    switch (p.merge.kind) {
      case detail::MergeKind::CatDim:
        d.set("cat_dim", Value::integer(p.merge.cat_dim));
        break;
      case detail::MergeKind::TwoSubParams:
        d.set("cat_dim", Value::integer(0));
        d.set("param_n_sub_params", Value::integer(2));
        break;
      case detail::MergeKind::Replicated:
      case detail::MergeKind::Average:
        break;
    }
    if (p.merge.vocab) d.set("vocab_tensor", Value::boolean(true));
    const bool requires_grad =
        parts_.keep[static_cast<size_t>(p.group)][static_cast<size_t>(p.runs.front().rank)][s].requires_grad;
    Tensor t = state_tensor(p, s, requires_grad);
    t.shape = p.out_shape;
    t.strides = Tensor::contiguous_strides(p.out_shape);
    d.set("param", Value::tensor(std::move(t)));
    write_file(folder + "/" + kStates[s] + ".pt", d, static_cast<uint64_t>(p.out_numel) * 4);
  }

  // The float32 tensor of `state` of param p, produced when written: straight from the mapped partitions
  // (each run written as it lies, pages handed back after), or through a buffer where values change (averaged
  // params).
  Tensor state_tensor(const SourceParam& p, size_t s, bool requires_grad) const {
    const Partitions* parts = &parts_;
    Progress* progress = progress_;
    if (p.merge.kind == detail::MergeKind::Average)
      return deepspeed::produced_f32(
          p.out_numel,
          [parts, &p, s, progress](int64_t first, int64_t n, float* out) {
            if (progress) progress->check();
            fill_param(*parts, p, s, first, n, out);
          },
          -1, requires_grad);
    auto st = std::make_shared<Storage>();
    st->dtype = DType::F32;
    st->numel = static_cast<uint64_t>(p.out_numel);
    st->producer = [parts, &p, s, progress](ByteSink& sink) {
      int64_t left = p.out_numel;  // a vocabulary param keeps only its first rows: a prefix of the flat param
      for (const Run& r : p.runs) {
        const auto g = static_cast<size_t>(p.group), rank = static_cast<size_t>(r.rank);
        const float* src = parts->data[g][rank][s] + r.partition_offset;
        for (int64_t done = 0; done < r.numel && left > 0;) {
          if (progress) progress->check();
          const int64_t n = std::min({kChunk, r.numel - done, left});
          sink.write({reinterpret_cast<const uint8_t*>(src + done), static_cast<size_t>(n) * sizeof(float)});
          detail::release(parts->keep[g][rank][s], r.partition_offset + done, n);
          done += n;
          left -= n;
        }
      }
    };
    Tensor t;
    t.dtype = DType::F32;
    t.shape = {p.out_numel};
    t.strides = {1};
    t.storage = std::move(st);
    t.requires_grad = requires_grad;
    return t;
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
      out.set("partition_count",
              Value::list(std::vector<Value>(
                  pc->items().size(),
                  Value::integer(static_cast<int64_t>(cat_.groups.front().partitions.size())))));
    if (step_files_) {
      const Value* pg = dict_get(dict_get(&osd, "base_optimizer_state"), "param_groups");
      if (!pg) refuse(cat_, "rank 0's base_optimizer_state has no param_groups");
      out.set("param_groups", pg->clone());
    }
    return out;
  }

  void write_all(const std::string& out_dir) {
    const std::string tag_dir = out_dir + "/" + result_.tag;
    const std::string zero_dir = tag_dir + "/zero";
    detail::make_dir(io_, tag_dir);
    detail::make_dir(io_, zero_dir);
    uint64_t total = 0;
    for (const auto& p : params_) total += static_cast<uint64_t>(p.out_numel) * 12;
    if (progress_) progress_->set_stage("writing universal checkpoint", total);

    // Files in parallel, largest first: each thread writes one state file at a time straight from the mapped
    // partitions, and several files in flight overlap their writes and fsyncs.
    for (const auto& p : params_) detail::make_dir(io_, zero_dir + "/" + p.name);
    std::vector<std::pair<size_t, size_t>> tasks;  // (param, state)
    for (size_t i = 0; i < params_.size(); ++i)
      for (size_t st = 0; st < kStates.size(); ++st) tasks.emplace_back(i, st);
    std::stable_sort(tasks.begin(), tasks.end(), [this](const auto& a, const auto& b) {
      return params_[a.first].out_numel > params_[b.first].out_numel;
    });
    const unsigned threads = std::clamp<unsigned>(opt_.threads ? opt_.threads : 4, 1, 16);
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto work = [&] {
      try {
        for (size_t i; !failed.load() && (i = next.fetch_add(1)) < tasks.size();)
          write_state(zero_dir, params_[tasks[i].first], tasks[i].second);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!failed.exchange(true)) error = std::current_exception();
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < std::min<size_t>(threads, tasks.size()); ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
    result_.params = params_.size();

    write_file(zero_dir + "/optimizer_state.pt", optimizer_state_root(), 0);
    // ds_to_universal.py copies every mp* file of the tag folder.
    for (const auto& f : cat_.files) {
      if (f.path.rfind("mp", 0) != 0 || f.path.find('/') != std::string::npos) continue;
      if (add_iteration_ && f.role == deepspeed::FileRole::Model) {
        Value root = ckpt_.model_file(f.mp_rank, 0).root.clone();
        root.set("iteration", Value::integer(*add_iteration_));
        write_file(tag_dir + "/" + f.path, root, f.bytes);
      } else {
        deepspeed::copy_file(f.abs_path, tag_dir + "/" + f.path, io_);
        bytes_ += f.bytes;
        ++files_;
      }
    }
    if (const int e = io_.fsync_dir(zero_dir); e != 0) throw Error(zero_dir, "", "fsync of directory failed");
    if (const int e = io_.fsync_dir(tag_dir); e != 0) throw Error(tag_dir, "", "fsync of directory failed");
    deepspeed::write_text_file(out_dir + "/latest_universal", result_.tag, io_);
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
    std::vector<float> a(static_cast<size_t>(kChunk));
    const std::string zero_dir = result_.output + "/" + result_.tag + "/zero";
    for (const auto& p : params_) {
      const auto at = wc.find_param(p.name);
      if (!at) {
        fail.push_back("zero/" + p.name + "/ is not read back");
        continue;
      }
      for (size_t s = 0; s < kStates.size(); ++s) {
        const std::string rel = "zero/" + p.name + "/" + kStates[s] + ".pt";
        const TorchFile f = TorchFile::open(state_file(zero_dir, p.name, kStates[s]));
        const Value* v = dict_get(&f.root, "param");
        if (!v || !v->is_tensor() || v->as_tensor().shape != p.out_shape ||
            v->as_tensor().dtype != DType::F32 || !v->as_tensor().is_contiguous()) {
          fail.push_back(rel + " does not hold a float32 tensor of the expected shape");
          continue;
        }
        const float* w = reinterpret_cast<const float*>(v->as_tensor().contiguous_bytes().data());
        for (int64_t first = 0; first < p.out_numel; first += kChunk) {
          const int64_t n = std::min(kChunk, p.out_numel - first);
          fill_param(parts_, p, s, first, n, a.data());
          if (std::memcmp(a.data(), w + first, static_cast<size_t>(n) * 4) != 0) {
            fail.push_back(rel + " differs from the source near element " + num(first));
            break;
          }
          detail::release(v->as_tensor(), first, n);
        }
      }
      const int64_t want = group_adam_step_[static_cast<size_t>(p.group)];
      const auto& up = wc.universal->params[static_cast<size_t>(at->first)];
      if (step_files_ && group_step_[static_cast<size_t>(p.group)] && up.step != want)
        fail.push_back("zero/" + p.name + "/step.pt does not hold the saved Adam step " + num(want));
      if (add_iteration_ && p.group == 0 &&
          (!wc.universal->iteration || *wc.universal->iteration + 1 != want))
        fail.push_back("iteration + 1 is not the saved Adam step " + num(want));
    }
    // The values are the source's bit for bit, so a statistics pass would only repeat the source's diagnosis
    // (and map the whole output): the verification report holds what re-opening the output found.
    for (const auto& p : wc.problems) {
      analysis::Finding f;
      f.code = p.code;
      f.severity = p.severity == "error"     ? analysis::Severity::Error
                   : p.severity == "warning" ? analysis::Severity::Warning
                                             : analysis::Severity::Info;
      f.message = p.message;
      f.params = p.params;
      f.ranks = p.ranks;
      result_.verification.findings.push_back(std::move(f));
    }
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
