// The DeepSpeed family's rules (deepspeed_rules.h): moved here from analysis/rules.cpp, where they read
// deepspeed::Catalog (#27); their findings and their order in a report are as before.
#include "sources/deepspeed/deepspeed_rules.h"

#include <algorithm>
#include <map>
#include <utility>

#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/number_text.h"
#include "ckptdoc/sources/deepspeed/writer.h"

namespace ckptdoc::deepspeed::detail {
namespace {

class DeepSpeedRules final : public model::SourceRules {
 public:
  explicit DeepSpeedRules(const Catalog& c)
      : zero_like_(c.zero_stage > 0 || c.wrapper == OptimizerWrapper::BF16Optimizer),
        state_in_model_file_(c.wrapper == OptimizerWrapper::FP16Optimizer ||
                             c.wrapper == OptimizerWrapper::TorchOptimizer),
        optim_file_count_(c.optim_file_count),
        dp_world_size_(c.dp_world_size),
        mp_rank_(c.mp_rank),
        partition_count_(c.partition_count),
        lp_dtype_(c.lp_dtype),
        loss_scaler_(c.loss_scaler),
        global_steps_(c.global_steps),
        skipped_steps_(c.skipped_steps) {
    for (const auto& g : c.groups)
      if (g.expert && !g.partitions.empty()) expert_groups_.emplace_back(g.file_group, g.partitions.size());
    for (const auto& f : c.files)
      if (f.role == FileRole::Optim && f.mp_rank == c.mp_rank)
        optim_files_.emplace(f.dp_rank, std::make_pair(f.path, f.bf16_prefix));  // the first, as optim_file
    if (c.universal)
      for (const auto& p : c.universal->params) optimizer_group_of_flat_.push_back(p.optimizer_group);
  }

  std::optional<model::Finding> optimizer_state_missing() const override {
    if (!zero_like_ || optim_file_count_ != 0) return std::nullopt;
    return model::Finding(
        model::Code::OptimizerStateMissing,
        "No optimizer files: this is a weights-only checkpoint. DeepSpeed loads it only with "
        "load_optimizer_states=False (or load_module_only=True); v0.13+ then refreshes the fp32 masters from "
        "the weights, older versions keep stale masters (DeepSpeed PR #762).");
  }

  bool optimizer_state_saved() const override { return optim_file_count_ != 0 || state_in_model_file_; }

  // A universal folder's flat groups are single params: grouped by the optimizer group they came from.
  int optimizer_group(int flat) const override {
    if (flat >= 0 && static_cast<size_t>(flat) < optimizer_group_of_flat_.size())
      return optimizer_group_of_flat_[static_cast<size_t>(flat)];
    return flat;
  }

  // The optimizer files of those ranks. Under mpirun on node-local storage a rank's file is on another node:
  // named as DeepSpeed names it, so every node's report agrees.
  std::vector<std::string> optimizer_files(const std::set<int>& ranks) const override {
    bool bf16_prefix = false;
    for (const auto& [r, file] : optim_files_)
      if (r >= 0 && r < dp_world_size_) {
        bf16_prefix = file.second;
        break;
      }
    std::vector<std::string> files;
    for (int r : ranks) {
      const auto it = optim_files_.find(r);
      files.push_back(it != optim_files_.end() ? it->second.first
                                               : optim_file_name(bf16_prefix, r, mp_rank_));
    }
    return files;
  }

  // DeepSpeed's #762: before v0.13 a load without optimizer states kept the masters it initialised.
  StaleMasterWords stale_master_words() const override {
    return {"e.g. after load_checkpoint(..., load_optimizer_states=False) before v0.13",
            "ckptdoc repair --refresh-fp32"};
  }

  // ZeRO's init step, v0.13+'s load without optimizer states, and the resume measured with DeepSpeed 0.19.8
  // (tests/realds, v019_z2_fp16_dp2_fp16_masters).
  OptimizerStateWords optimizer_state_words() const override {
    return {
        "a reset or a load without optimizer states in DeepSpeed v0.13+",
        "DeepSpeed saves it right after deepspeed.initialize() (ZeRO runs one zero-gradient step at init) or "
        "after load_checkpoint(..., load_optimizer_states=False)",
        "DeepSpeed's params there",
        " (DeepSpeed 0.19.8 resuming its own files moved weights by up to 140 in that step)",
        "load_checkpoint(..., load_optimizer_states=False)",
        "ZeRO"};
  }

  // DeepSpeed's config flags that keep the masters in the weights' dtype (bf16 ones from 0.18.3).
  std::string masters_in_16bit_setting(bool bf16) const override {
    return bf16 ? "bf16_master_weights_and_grads, DeepSpeed 0.18.3+" : "fp16_master_weights_and_grads";
  }

  void record_rules(std::vector<model::Finding>& out) const override {
    world_size_rules(out);
    loss_scale_rules(out);
  }

 private:
  void world_size_rules(std::vector<model::Finding>& out) const {
    const bool reported = std::any_of(out.begin(), out.end(), [](const model::Finding& f) {
      return f.code == model::code_name(model::Code::WorldSizeMismatch);
    });
    if (reported || optim_file_count_ == 0 || dp_world_size_ <= 0) return;
    std::string why;
    if (dp_world_size_ != optim_file_count_)
      why = "the model file says dp_world_size " + std::to_string(dp_world_size_) + " but there are " +
            std::to_string(optim_file_count_) + " optimizer files";
    for (size_t g = 0; g < partition_count_.size() && why.empty(); ++g) {
      // An MoE expert group is partitioned over the expert-data-parallel ranks only: dp / ep of them.
      int want = optim_file_count_;
      for (const auto& [file_group, partitions] : expert_groups_)
        if (file_group == static_cast<int>(g))
          want = optim_file_count_ * static_cast<int>(partitions) / std::max(dp_world_size_, 1);
      if (partition_count_[g] != want)
        why = "group " + std::to_string(g) + " has partition_count " + std::to_string(partition_count_[g]) +
              " but there are " + std::to_string(optim_file_count_) + " optimizer files" +
              (want != optim_file_count_ ? " (an expert group: " + std::to_string(want) + " expected)" : "");
    }
    if (why.empty()) return;
    model::Finding f(
        model::Code::WorldSizeMismatch,
        "World sizes disagree: " + why +
            ". DeepSpeed refuses to load optimizer states at another world size. "
            "Fix: re-partition to the world size you will train with (ckptdoc repair --repartition "
            "--world-size N).");
    f.evidence = {{"dp_world_size", double(dp_world_size_)}, {"optim_files", double(optim_file_count_)}};
    out.push_back(std::move(f));
  }

  void loss_scale_rules(std::vector<model::Finding>& out) const {
    if (lp_dtype_ != DType::F16 || !loss_scaler_.present) return;
    const auto& ls = loss_scaler_;
    if (ls.dynamic && ls.cur_scale <= std::max(ls.min_scale, 1.0)) {
      model::Finding f(
          model::Code::LossScaleCollapsed,
          "The fp16 dynamic loss scale is at its floor (" + three_significant_digits(ls.cur_scale) +
              "): gradients overflowed again and again. Training is probably diverging; check the learning "
              "rate and data, or switch to bf16.");
      f.evidence = {{"cur_scale", ls.cur_scale}, {"min_scale", ls.min_scale}};
      out.push_back(std::move(f));
    } else if (global_steps_ >= 10 && skipped_steps_ * 5 > global_steps_) {
      model::Finding f(model::Code::LossScaleCollapsed,
                       std::to_string(skipped_steps_) + " of " + std::to_string(global_steps_) +
                           " steps were skipped for fp16 overflow: the loss scale keeps collapsing.");
      f.evidence = {{"skipped_steps", double(skipped_steps_)}, {"global_steps", double(global_steps_)}};
      out.push_back(std::move(f));
    }
  }

  bool zero_like_;
  bool state_in_model_file_;  // FP16_Optimizer, a plain torch optimizer: no optimizer files by design
  int optim_file_count_;
  int dp_world_size_;
  int mp_rank_;
  std::vector<int> partition_count_;
  std::vector<std::pair<int, size_t>> expert_groups_;        // (file group, partitions) of each expert group
  std::map<int, std::pair<std::string, bool>> optim_files_;  // dp rank -> (path, bf16_prefix)
  std::vector<int> optimizer_group_of_flat_;                 // a universal folder's
  DType lp_dtype_;
  LossScalerInfo loss_scaler_;
  int64_t global_steps_, skipped_steps_;
};

}  // namespace

std::shared_ptr<const model::SourceRules> rules_of(const Catalog& catalog) {
  return std::make_shared<DeepSpeedRules>(catalog);
}

}  // namespace ckptdoc::deepspeed::detail
