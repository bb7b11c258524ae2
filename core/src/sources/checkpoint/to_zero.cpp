// convert_to_zero: a universal checkpoint back into rigid ZeRO-1/2 (or BF16_Optimizer) files for a chosen
// data-parallel size, laid out with DeepSpeed's own flattening (§5.1, §5.2) and the padding bookkeeping of
// the checkpoint's ds_version, written as `repair --repartition` writes a re-partitioned checkpoint. The
// universal folder keeps no Adam hyper-parameters before DeepSpeed 0.14.1: they come from its param_groups or
// a template.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/repair/plan.h"
#include "ckptdoc/sources/checkpoint/convert.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/deepspeed/layout.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "format/tensor_pages.h"
#include "sources/checkpoint/output_folder.h"
#include "sources/deepspeed/value_access.h"

namespace fs = std::filesystem;

namespace ckptdoc::universal {

using deepspeed::Checkpoint;
using deepspeed::GroupLayout;
using deepspeed::OptimizerWrapper;
using deepspeed::ParamEntry;
using deepspeed::detail::dict_get;
using deepspeed::detail::int_key;
using deepspeed::detail::list_at;

namespace {

constexpr std::array<const char*, 3> kStates = {"fp32", "exp_avg", "exp_avg_sq"};
std::string num(int64_t v) {
  return std::to_string(v);
}

class ToZero {
 public:
  ToZero(const Checkpoint& u, const ToZeroOptions& o, Progress* progress, FileIo& io)
      : u_(u), cat_(u.catalog()), opt_(o), progress_(progress), caller_io_(io) {}

  ConvertResult run(const std::string& output) {
    check_input();
    result_.target = "zero";
    const auto checked = detail::checked_output(output, cat_.save_dir, cat_.tag_dir, opt_.force);
    result_.output = checked.path;
    std::string tag = opt_.tag;
    if (tag.empty()) {
      tag = cat_.tag;
      const std::string suffix = "_universal";
      if (tag.size() > suffix.size() && tag.compare(tag.size() - suffix.size(), suffix.size(), suffix) == 0)
        tag.resize(tag.size() - suffix.size());
    }
    if (tag.find('/') != std::string::npos || tag == "." || tag == "..")
      throw Error(ErrorKind::PathEscape, "", "--tag", "a folder name, not a path");
    result_.tag = tag;
    open_template();
    if (opt_.world_size) {
      dp_ = *opt_.world_size;
    } else if (tmpl_) {
      dp_ = static_cast<int>(tmpl_->catalog().groups.front().partitions.size());
    } else {
      throw Error(ErrorKind::InvalidRequest, "", "--world-size",
                  "required: the data-parallel size the job will load the checkpoint with");
    }
    if (dp_ < 1 || dp_ > 65536)
      throw Error(ErrorKind::InvalidRequest, "", "--world-size", "must be between 1 and 65536");
    lay_out();
    read_steps();
    result_.notes.push_back("load it with engine.load_checkpoint(\"" + result_.output + "\") on " + num(dp_) +
                            " data-parallel ranks (without load_universal)");
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
  const Checkpoint& u_;
  const deepspeed::Catalog& cat_;
  const ToZeroOptions& opt_;
  Progress* progress_;
  FileIo& caller_io_;
  FileIo* io_ = nullptr;  // while writing: the output folder's (its fsyncs are made at publishing)
  ConvertResult result_;
  std::shared_ptr<Checkpoint> tmpl_;
  int dp_ = 0;
  std::vector<GroupLayout> groups_;             // the new layout, one per optimizer group
  std::map<std::string, int> universal_index_;  // param -> the universal catalog's flat group (= param)
  std::vector<std::vector<int>>
      source_;  // [group][param in group]: the universal catalog's flat group (= param)
  // The last source tensor a filler read: consecutive chunks of a large param map its file once.
  struct SourceCache {
    size_t param = SIZE_MAX;
    std::optional<Tensor> tensor;
  };
  std::vector<Value> group_step_;  // the `step` value each group's state entry gets
  std::vector<int64_t> group_step_count_;

  bool bf16_optimizer() const { return cat_.wrapper == OptimizerWrapper::BF16Optimizer; }
  const Value& universal_osd() const { return u_.optimizer_state(0); }

  void check_input() {
    if (!cat_.universal)
      throw Error(ErrorKind::InvalidRequest, cat_.tag_dir, "",
                  "not a universal checkpoint (it has no zero/ folder)");
    if (cat_.wrapper != OptimizerWrapper::Zero12 && cat_.wrapper != OptimizerWrapper::BF16Optimizer)
      throw Error(ErrorKind::Unsupported, cat_.tag_dir, "",
                  "only universal checkpoints of ZeRO-1/2 or BF16_Optimizer runs are converted to "
                  "rigid files; this one is " +
                      std::string(deepspeed::wrapper_name(cat_.wrapper)));
    if (cat_.mp_world_size > 1)
      throw Error(ErrorKind::Unsupported, cat_.tag_dir, "",
                  "tensor/pipeline-parallel universal checkpoints are not converted back yet");
    std::string errors;
    for (const auto& p : cat_.problems)
      if (p.severity == model::Severity::Error) errors += "\n  " + p.code + ": " + p.message;
    if (!errors.empty())
      throw Error(ErrorKind::Inconsistent, cat_.tag_dir, "",
                  "the universal checkpoint has problems a conversion cannot work around:" + errors);
  }

  // The template: optional where zero/optimizer_state.pt holds the param_groups, required otherwise.
  void open_template() {
    if (!opt_.target) {
      if (!cat_.universal->has_param_groups)
        throw Error(
            ErrorKind::NotFound, cat_.tag_dir + "/zero/optimizer_state.pt", "",
            "this universal checkpoint keeps no optimizer hyper-parameters (lr, betas, eps, weight decay: "
            "DeepSpeed's converter adds param_groups only from 0.14.1 on), and ckptdoc does not invent them. "
            "Pass --target DIR: a rigid checkpoint of the same model and optimizer (e.g. the one it was "
            "converted from) whose optimizer files hold them");
      return;
    }
    tmpl_ = Checkpoint::open(*opt_.target);
    const auto& tc = tmpl_->catalog();
    if (tc.universal)
      throw Error(ErrorKind::InvalidRequest, *opt_.target, "--target",
                  "a rigid checkpoint is needed, not a universal one");
    if (tc.wrapper != cat_.wrapper)
      throw Error(ErrorKind::Inconsistent, *opt_.target, "--target",
                  expected_found(std::string(deepspeed::wrapper_name(cat_.wrapper)) + " optimizer files",
                                 std::string(deepspeed::wrapper_name(tc.wrapper))));
    for (const auto& p : tc.problems)
      if (p.severity == model::Severity::Error)
        throw Error(ErrorKind::Inconsistent, *opt_.target, "--target",
                    "the template has problems: " + p.code + ": " + p.message);
    if (tc.groups.empty() || !tc.optim_file(0))
      throw Error(ErrorKind::NotFound, *opt_.target, "--target",
                  "no optimizer files to take hyper-parameters from");
  }

  void lay_out() {
    std::vector<std::vector<ParamEntry>> by_group;
    for (size_t k = 0; k < cat_.universal->params.size(); ++k) {
      const auto& pf = cat_.universal->params[k];
      const auto g = static_cast<size_t>(std::max(pf.optimizer_group, 0));
      if (by_group.size() <= g) by_group.resize(g + 1);
      const auto& e = cat_.groups[k].params.front();
      by_group[g].push_back(ParamEntry{e.name, e.shape, e.numel, 0});
      universal_index_[e.name] = static_cast<int>(k);
    }
    if (tmpl_) {  // the template must describe the same params in the same groups
      const auto& tg = tmpl_->catalog().groups;
      bool same = tg.size() == by_group.size();
      for (size_t g = 0; same && g < tg.size(); ++g) {
        same = tg[g].params.size() == by_group[g].size();
        for (size_t i = 0; same && i < by_group[g].size(); ++i)
          same = tg[g].params[i].name == by_group[g][i].name && tg[g].params[i].shape == by_group[g][i].shape;
      }
      if (!same)
        throw Error(ErrorKind::Inconsistent, *opt_.target, "--target",
                    "its param groups (names, shapes, order) differ from the universal "
                    "checkpoint's param_shapes: a template of the same model is needed");
    }
    const auto rules = deepspeed::zero12_rules_for_version(cat_.ds_version);
    source_.resize(by_group.size());
    for (size_t g = 0; g < by_group.size(); ++g) {
      for (const auto& p : by_group[g]) source_[g].push_back(universal_index_.at(p.name));
      // Every state file checked now, so nothing is written from a missing one; each is mapped again only
      // while its bytes are copied (a large model has more files than a process can keep mapped).
      for (size_t s = 0; s < kStates.size(); ++s)
        for (size_t i = 0; i < by_group[g].size(); ++i)
          source(g, s, i, static_cast<int64_t>(by_group[g][i].numel));
      groups_.push_back(bf16_optimizer()
                            ? deepspeed::layout_bf16_optimizer(static_cast<int>(g), by_group[g], dp_)
                            : deepspeed::layout_zero12(static_cast<int>(g), by_group[g], dp_, rules));
    }
    result_.params = cat_.universal->params.size();
  }

  // Each group's Adam step: step.pt (as saved), else iteration + 1 (what DeepSpeed 0.12.3-0.14.0 give it), in
  // the type the optimizer saves it (torch Adam: a 0-dim float32 tensor; from step.pt or the template).
  void read_steps() {
    const auto& u = *cat_.universal;
    for (size_t g = 0; g < groups_.size(); ++g) {
      std::optional<int64_t> step;
      Value value;
      for (size_t k = 0; k < u.params.size(); ++k) {
        if (u.params[k].optimizer_group != static_cast<int>(g)) continue;
        const auto s = u.params[k].step
                           ? u.params[k].step
                           : (u.iteration ? std::optional<int64_t>(*u.iteration + 1) : std::nullopt);
        if (!s)
          throw Error(ErrorKind::NotFound, cat_.tag_dir, "zero/" + u.params[k].name,
                      "no step.pt and no iteration: the Adam step is unknown");
        if (step && *step != *s)
          throw Error(ErrorKind::Inconsistent, cat_.tag_dir,
                      "optimizer group " + num(static_cast<int64_t>(g)), "its params hold different steps");
        if (value.is_none() && u.params[k].step) value = step_file_value(u.params[k].name);
        step = s;
      }
      if (!step)
        throw Error(ErrorKind::Corrupt, cat_.tag_dir, "optimizer group " + num(static_cast<int64_t>(g)),
                    "holds no params");
      if (value.is_none()) {
        const Value* te =
            tmpl_ ? int_key(dict_get(dict_get(&tmpl_->optimizer_state(0), "base_optimizer_state"), "state"),
                            static_cast<int64_t>(g))
                  : nullptr;
        const Value* ts = dict_get(te, "step");
        if (!ts)
          throw Error(
              ErrorKind::NotFound, opt_.target.value_or(cat_.tag_dir),
              "optimizer group " + num(static_cast<int64_t>(g)),
              "the step's type is unknown (no step.pt, and the template's optimizer state has no step)");
        value = ts->is_tensor() ? deepspeed::step_tensor(static_cast<float>(*step)) : Value::integer(*step);
        result_.assumptions.push_back(
            "group " + num(static_cast<int64_t>(g)) + ": Adam step " + num(*step) +
            " = iteration + 1 (what DeepSpeed 0.12.3-0.14.0's universal loader gives it), "
            "stored as the template stores it");
      }
      group_step_.push_back(std::move(value));
      group_step_count_.push_back(*step);
    }
  }

  Value step_file_value(const std::string& param) const {
    const TorchFile f = TorchFile::open(cat_.universal->zero_dir + "/" + param + "/step.pt");
    return f.root.clone();
  }

  // State s of param i of group g: a float32 tensor of `numel` elements, mapped; throws naming the file.
  Tensor source(size_t g, size_t s, size_t i, int64_t numel) const {
    const int k = source_[g][i];
    auto t = s == 0 ? u_.fp32_partition(k, 0) : u_.moment_partition(k, 0, kStates[s]);
    if (!t || t->numel() != numel || t->dtype != DType::F32 || !t->is_contiguous())
      throw Error(
          ErrorKind::Corrupt, cat_.tag_dir,
          "zero/" + cat_.groups[static_cast<size_t>(k)].params.front().name + "/" + kStates[s] + ".pt",
          "missing, unreadable, or not a float32 tensor of the param's size");
    return *t;
  }

  const float* source_data(size_t g, size_t s, size_t i, SourceCache& cache) const {
    if (cache.param != i) {
      if (cache.tensor) cache.tensor->check_unchanged();  // commit() would refuse too; this names the file
      cache.tensor.reset();                               // unmapped before the next is mapped
      cache.tensor = source(g, s, i, groups_[g].params[i].numel);
      cache.param = i;
    }
    return reinterpret_cast<const float*>(cache.tensor->contiguous_bytes().data());
  }

  // Elements [first, first + n) of new rank r's partition of group g: params in flat order, zero padding.
  void fill(size_t g, size_t s, int r, int64_t first, int64_t n, float* out, SourceCache& cache) const {
    const GroupLayout& G = groups_[g];
    const int64_t base = static_cast<int64_t>(r) * G.partition_numel + first;
    int64_t done = 0;
    for (size_t i = 0; i < G.params.size() && done < n; ++i) {
      const auto& p = G.params[i];
      const int64_t at = base + done;
      if (p.offset + p.numel <= at) continue;
      if (p.offset > at) {
        const int64_t gap = std::min(n - done, p.offset - at);
        std::fill(out + done, out + done + gap, 0.0f);
        done += gap;
        if (done >= n) break;
      }
      const int64_t in = base + done - p.offset;
      const int64_t take = std::min(n - done, p.numel - in);
      std::memcpy(out + done, source_data(g, s, i, cache) + in, static_cast<size_t>(take) * sizeof(float));
      release_pages(*cache.tensor, in, take);
      done += take;
    }
    std::fill(out + done, out + n, 0.0f);
  }

  deepspeed::FloatFill filler(size_t g, size_t s, int r) const {
    Progress* progress = progress_;
    auto cache = std::make_shared<SourceCache>();
    return [this, g, s, r, progress, cache](int64_t first, int64_t n, float* out) {
      if (progress) progress->check();
      fill(g, s, r, first, n, out, *cache);
    };
  }

  // The state entry of group g: the template's (key order, extra keys kept) or torch Adam's own layout.
  Value state_entry(size_t g, int r) const {
    const GroupLayout& G = groups_[g];
    Value e = Value::dict();
    const Value* te =
        tmpl_ ? int_key(dict_get(dict_get(&tmpl_->optimizer_state(0), "base_optimizer_state"), "state"),
                        static_cast<int64_t>(g))
              : nullptr;
    if (te && te->is_dict()) {
      for (const auto& [k, v] : te->as_dict().items) {
        const std::string key = k.is(Value::Kind::Str) ? k.as_str() : "";
        if (key == "step" || key == "exp_avg" || key == "exp_avg_sq") {
          e.set_item(k.clone(), Value::none());  // placeholder keeps the template's order
        } else {
          throw Error(ErrorKind::Unsupported, *opt_.target, "optimizer state key '" + key + "'",
                      "the universal checkpoint does not hold it (only fp32, exp_avg, exp_avg_sq and step)");
        }
      }
    }
    e.set("step", group_step_[g].clone());
    for (size_t s = 1; s < kStates.size(); ++s)
      e.set(kStates[s], Value::tensor(deepspeed::produced_f32(G.partition_numel, filler(g, s, r))));
    return e;
  }

  Value param_groups() const {
    const Value* pg = dict_get(&universal_osd(), "param_groups");
    if (!pg) pg = dict_get(dict_get(&tmpl_->optimizer_state(0), "base_optimizer_state"), "param_groups");
    if (!pg || !pg->is_sequence() || pg->items().size() != groups_.size())
      throw Error(
          ErrorKind::Inconsistent, opt_.target.value_or(cat_.tag_dir), "param_groups",
          expected_found(num(static_cast<int64_t>(groups_.size())) + " param groups",
                         pg && pg->is_sequence() ? num(static_cast<int64_t>(pg->items().size())) : "none"));
    Value out = pg->clone();
    for (size_t g = 0; g < out.items().size(); ++g) {
      Value& grp = out.items_mut()[g];
      grp.set("params", Value::list({Value::integer(static_cast<int64_t>(g))}));
      if (grp.get("step")) grp.set("step", Value::integer(group_step_count_[g]));  // FusedAdam keeps one here
    }
    return out;
  }

  Value optim_root(int r) const {
    const Value& uosd = universal_osd();
    std::vector<Value> fp32s, paddings, counts, mappings;
    Value state = Value::dict();
    for (size_t g = 0; g < groups_.size(); ++g) {
      const GroupLayout& G = groups_[g];
      const auto& rp = G.partitions[static_cast<size_t>(r)];
      fp32s.push_back(
          Value::tensor(deepspeed::produced_f32(rp.saved_numel, filler(g, 0, r), G.partition_numel, true)));
      paddings.push_back(Value::integer(rp.recorded_padding));
      counts.push_back(Value::integer(dp_));
      mappings.push_back(deepspeed::slice_mappings_value(G, r));
      state.set_item(Value::integer(static_cast<int64_t>(g)), state_entry(g, r));
    }
    Value bos = Value::dict();
    bos.set("state", std::move(state));
    bos.set("param_groups", param_groups());
    std::map<std::string, Value> computed;
    computed["base_optimizer_state"] = std::move(bos);
    computed["single_partition_of_fp32_groups"] = Value::list(std::move(fp32s));
    computed["group_paddings"] = Value::list(std::move(paddings));
    computed["partition_count"] = Value::list(std::move(counts));
    computed["param_slice_mappings"] = Value::list(std::move(mappings));
    // Key order of DeepSpeed's state_dict() (§4.1, §4.3); the optimizer globals come from the universal
    // folder.
    const std::vector<std::string> order =
        bf16_optimizer() ? std::vector<std::string>{"clip_grad",
                                                    "base_optimizer_state",
                                                    "single_partition_of_fp32_groups",
                                                    "group_paddings",
                                                    "partition_count",
                                                    "ds_version",
                                                    "param_slice_mappings"}
                         : std::vector<std::string>{
                               "loss_scaler", "dynamic_loss_scale",   "overflow",
                               "clip_grad",   "base_optimizer_state", "single_partition_of_fp32_groups",
                               "zero_stage",  "group_paddings",       "partition_count",
                               "ds_version",  "param_slice_mappings"};
    const Value* tosd = tmpl_ ? &tmpl_->optimizer_state(0) : nullptr;
    Value osd = Value::dict();
    for (const auto& key : order) {
      if (auto it = computed.find(key); it != computed.end()) {
        osd.set(key, it->second);
      } else if (const Value* v = uosd.get(key)) {
        osd.set(key, v->clone());
      } else if (const Value* tv = tosd ? tosd->get(key) : nullptr) {
        osd.set(key, tv->clone());
      } else if (key == "ds_version") {
        throw Error(ErrorKind::Corrupt, cat_.tag_dir + "/zero/optimizer_state.pt", "key 'ds_version'",
                    "missing (DeepSpeed's loader requires it)");
      }
    }
    for (const auto& [k, v] :
         uosd.as_dict().items)  // anything else rank 0 saved (but not the converter's additions)
      if (k.is(Value::Kind::Str) && k.as_str() != "param_groups" && !osd.get(k.as_str()))
        osd.set_item(k.clone(), v.clone());
    const Value& model = u_.model_file(0, 0).root;
    Value root = Value::dict();
    root.set("optimizer_state_dict", std::move(osd));
    const Value* touter = tmpl_ ? &tmpl_->optim_file(0).root : nullptr;
    for (const char* key : {"ds_config", "ds_version"}) {
      if (const Value* v = model.get(key))
        root.set(key, v->clone());
      else if (const Value* tv = touter ? touter->get(key) : nullptr)
        root.set(key, tv->clone());
    }
    return root;
  }

  void write_all(const std::string& out_dir) {
    const std::string tag_dir = out_dir + "/" + result_.tag;
    detail::make_dir(*io_, tag_dir);
    uint64_t total = 0;
    for (const auto& G : groups_) total += static_cast<uint64_t>(G.padded_numel) * 12;
    if (progress_) progress_->set_stage("writing ZeRO checkpoint", total);
    const bool bf16_prefix = cat_.lp_dtype == DType::BF16;
    for (int r = 0; r < dp_; ++r) {
      deepspeed::write_checkpoint_file(tag_dir + "/" + deepspeed::optim_file_name(bf16_prefix, r),
                                       optim_root(r), *io_);
      ++result_.files;
      uint64_t bytes = 0;
      for (const auto& G : groups_) bytes += static_cast<uint64_t>(G.partition_numel) * 12;
      result_.bytes_written += bytes;
      if (progress_) progress_->add(bytes);
    }
    for (const auto& f : cat_.files) {
      if (f.role != deepspeed::FileRole::Model) continue;
      Value root = u_.model_file(f.mp_rank, 0).root.clone();
      root.set("dp_world_size", Value::integer(dp_));
      deepspeed::write_checkpoint_file(tag_dir + "/" + f.path, root, *io_);
      ++result_.files;
      result_.bytes_written += f.bytes;
    }
    if (const int e = io_->fsync_dir(tag_dir); e != 0)
      throw Error(ErrorKind::Io, tag_dir, "", "fsync of directory failed");
    deepspeed::write_text_file(out_dir + "/latest", result_.tag, *io_);
    ++result_.files;
  }

  // Re-open the output: DeepSpeed's loader invariants hold, and every fragment on every new rank equals the
  // universal tensor it came from (bitwise).
  void verify() {
    auto& fail = result_.verify_failures;
    if (progress_) progress_->set_stage("verifying", 0);
    auto written = Checkpoint::open(result_.output);
    const auto& wc = written->catalog();
    for (const auto& f : repair::check_loader_invariants(*written)) fail.push_back(f);
    if (wc.groups.size() != groups_.size()) {
      fail.push_back("the output has " + num(static_cast<int64_t>(wc.groups.size())) + " groups, expected " +
                     num(static_cast<int64_t>(groups_.size())));
      return;
    }
    for (size_t g = 0; g < groups_.size(); ++g) {
      const GroupLayout& G = wc.groups[g];
      for (const auto& rp : G.partitions) {
        for (size_t s = 0; s < kStates.size(); ++s) {
          const auto t = s == 0 ? written->fp32_partition(G.index, rp.rank)
                                : written->moment_partition(G.index, rp.rank, kStates[s]);
          if (!t || t->dtype != DType::F32 || !t->is_contiguous()) {
            fail.push_back("rank " + num(rp.rank) + " group " + num(G.index) + ": " + kStates[s] +
                           " not read back");
            continue;
          }
          const float* w = reinterpret_cast<const float*>(t->contiguous_bytes().data());
          SourceCache cache;
          for (const auto& f : rp.fragments) {
            const float* src = source_data(g, s, static_cast<size_t>(f.param), cache) + f.param_offset;
            if (f.partition_offset + f.numel > t->numel() ||
                std::memcmp(w + f.partition_offset, src, static_cast<size_t>(f.numel) * 4) != 0) {
              fail.push_back("rank " + num(rp.rank) + ": " + kStates[s] + " of " +
                             G.params[static_cast<size_t>(f.param)].name +
                             " differs from the universal checkpoint");
              break;
            }
          }
        }
      }
    }
    analysis::DiagnoseOptions d;
    d.device = opt_.device;
    result_.verification = deepspeed::diagnose(*written, d, progress_);
  }
};

}  // namespace

ConvertResult convert_to_zero(const Checkpoint& universal, const std::string& output,
                              const ToZeroOptions& options, Progress* progress, FileIo& io) {
  return ToZero(universal, options, progress, io).run(output);
}

}  // namespace ckptdoc::universal
