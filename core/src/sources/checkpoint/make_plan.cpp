// make_plan: validates a repair request against the checkpoint and lists what will be written. It reads
// DeepSpeed's catalog and files, so it lives with DeepSpeed's source; the Plan it fills is repair/'s.
#include <filesystem>
#include <memory>

#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/rank_owners.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "ckptdoc/weights/weights_source.h"
#include "io/path_relation.h"
#include "sources/deepspeed/detect.h"
#include "sources/deepspeed/output_folder_check.h"
#include "sources/deepspeed/param_readers.h"
#include "sources/deepspeed/trainer_folder.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair {

using deepspeed::CheckpointFile;
using deepspeed::FileRole;
using deepspeed::OptimizerWrapper;

namespace {

// A request the planner turns down; most are bad options (InvalidRequest), the others say their kind.
// Fields are marked ("{lp_source}") and named as the front end names them (request_field.h).
// `where` is a field mark ("{force}"), rendered, or a path or "request", kept as it is.
[[noreturn]] void refuse(const std::string& where, const std::string& why,
                         ErrorKind kind = ErrorKind::InvalidRequest) {
  const bool mark = where.size() > 2 && where.front() == '{' && where.back() == '}' &&
                    request_field_from_id(std::string_view(where).substr(1, where.size() - 2));
  throw Error(kind, "", mark ? request_text(where) : where, request_text(why));
}

bool zero12_like(OptimizerWrapper w) {
  return w == OptimizerWrapper::Zero12 || w == OptimizerWrapper::BF16Optimizer;
}

}  // namespace

RepairRequest with_default_lp_source(const deepspeed::Checkpoint& ckpt, RepairRequest rq) {
  if (rq.refresh_fp32 && !rq.lp_source && ckpt.catalog().wrapper == OptimizerWrapper::Zero3 && ckpt.weights())
    rq.lp_source = ckpt.weights()->path();
  return rq;
}

Plan make_plan(const deepspeed::Checkpoint& ckpt, const std::string& output, const RepairRequest& request) {
  const RepairRequest rq = with_default_lp_source(ckpt, request);
  const auto& cat = ckpt.catalog();
  if (ckpt.weights_only())
    refuse(cat.tag_dir,
           "is a " + cat.description + ": repairs work on DeepSpeed checkpoints (export or diff it instead)",
           ErrorKind::Unsupported);
  Plan plan;
  plan.input = io::normalised_path(cat.save_dir);
  plan.output = io::normalised_path(output);
  plan.tag = cat.tag;
  if (cat.universal)
    refuse(cat.tag_dir,
           "a universal checkpoint is repaired by converting it: ckptdoc convert --to zero writes rigid "
           "files for any world size, which repair then works on",
           ErrorKind::Unsupported);

  if (cat.autoep)
    refuse(
        cat.tag_dir,
        "an AutoEP ZeRO-3 checkpoint (DeepSpeed 0.19.3+: experts partitioned per expert-parallel rank, "
        "ds_zero_partition_groups) is read by inspect, diagnose and export, but ckptdoc does not repair it; "
        "DeepSpeed's ds_to_universal.py converts it for a load at another topology",
        ErrorKind::Unsupported);

  const bool repartition = rq.world_size.has_value() || rq.target.has_value();
  const int n_actions = int(rq.refresh_fp32) + int(rq.reset_optimizer) + int(rq.drop_optimizer) +
                        int(repartition) + int(rq.restore_model_files);
  if (n_actions == 0)
    refuse(
        "request",
        "no repair asked for: choose {refresh_fp32}, {reset_optimizer}, {drop_optimizer}, {repartition} or "
        "{restore_model_files}");
  if (rq.restore_model_files && n_actions > 1)
    refuse("request", "{restore_model_files} runs alone: restore first, then repair its output");
  if (rq.drop_optimizer && n_actions > 1)
    refuse("request",
           "{drop_optimizer} writes no optimizer files, so it cannot be combined with other repairs");
  if (repartition && rq.refresh_fp32)
    refuse("request", "run {refresh_fp32} and {repartition} one after the other (refresh first)");
  if (rq.world_size && rq.target) refuse("request", "{world_size} and {target} are alternatives; give one");
  if (rq.across_processes && !rq.world_size)
    refuse("mpirun",
           "only {repartition} {world_size} runs across MPI processes; run other repairs in one process");
  if (rq.world_size && (*rq.world_size < 1 || *rq.world_size > 65536))
    refuse("{world_size}", "must be between 1 and 65536");
  if (rq.lp_source && !rq.refresh_fp32) refuse("{lp_source}", "only used with {refresh_fp32}");
  if (rq.allow_shape_change && !rq.target)
    refuse("{allow_shape_change}", "only used with {repartition} {target}");

  // Output safety: a new folder beside the input, never inside it and never holding it; --force replaces only
  // a checkpoint.
  const auto checked = deepspeed::detail::check_output_folder(output, {cat.save_dir, cat.tag_dir}, rq.force);
  plan.output = checked.path;
  plan.output_existed = checked.existed;

  // The checkpoint must be readable end to end.
  std::vector<std::string> errors;
  bool unsafe = false;
  size_t n_unsafe = 0;
  const bool moments_replaced = (rq.reset_optimizer || rq.drop_optimizer) && !repartition;
  for (const auto& p : cat.problems) {
    if (p.severity != model::Severity::Error) continue;
    if ((rq.across_processes || rq.rank_files_elsewhere) &&
        p.code == model::code_name(model::Code::RankFileMissing))
      continue;  // maybe on another node
    if (p.code == model::code_name(model::Code::UnsafePickle) && rq.allow_unsafe_pickle) continue;
    // What a restore writes.
    if (rq.restore_model_files && (p.code == model::code_name(model::Code::Zero3ModelFilesNotSaved) ||
                                   deepspeed::is_missing_zero3_model_files_problem(p)))
      continue;
    // Moments of the wrong shape, or lost on a rank, are not read by a repair that replaces or removes them
    // all.
    if (moments_replaced && (p.code == model::code_name(model::Code::OptimizerStateShapeMismatch) ||
                             p.code == model::code_name(model::Code::OptimizerStateIncomplete)))
      continue;
    unsafe = unsafe || p.code == model::code_name(model::Code::UnsafePickle);
    n_unsafe += p.code == model::code_name(model::Code::UnsafePickle) ? 1 : 0;
    errors.push_back(p.code + ": " + p.message);
  }
  if (!errors.empty()) {
    std::string msg = "the checkpoint has problems a repair cannot work around:";
    for (const auto& e : errors) msg += "\n  " + e;
    if (unsafe)
      msg += "\n(the output would carry the same pickle; pass {allow_unsafe_pickle} to write it anyway)";
    refuse(cat.tag_dir, msg,
           unsafe && errors.size() == n_unsafe ? ErrorKind::UnsafePickle : ErrorKind::Inconsistent);
  }

  const auto w = cat.wrapper;
  const std::string wname(deepspeed::wrapper_name(w));
  const int dp =
      cat.groups.empty() ? cat.dp_world_size : static_cast<int>(cat.groups.front().partitions.size());
  // A tensor/pipeline-parallel job is repaired model-parallel rank by model-parallel rank, each in its own
  // layout.
  const auto& topo = cat.topology;
  std::vector<std::shared_ptr<const deepspeed::Checkpoint>> slices;
  slices.reserve(static_cast<size_t>(ckpt.slice_count()));
  for (int m = 0; m < ckpt.slice_count(); ++m) slices.push_back(ckpt.slice(m));
  const bool parallel = topo.model_parallel() || topo.moe();
  if (parallel && (rq.target || rq.across_processes))
    refuse(rq.target ? "{target}" : "mpirun",
           "tensor/pipeline/expert-parallel checkpoints are repaired in one process and without {target} "
           "(graft)",
           ErrorKind::Unsupported);
  if (parallel && w == OptimizerWrapper::Zero3 && rq.refresh_fp32)
    refuse("{refresh_fp32}",
           "ZeRO-3 with tensor/pipeline/expert parallelism: {lp_source} holds consolidated weights, "
           "not each model-parallel rank's slices; not supported",
           ErrorKind::Unsupported);
  if (rq.world_size && topo.moe()) {
    for (const auto& g : cat.groups) {
      if (!g.expert) continue;
      int ep = 0;
      for (const auto& h : cat.groups) ep += h.file_group == g.file_group ? 1 : 0;
      if (*rq.world_size % ep != 0)
        refuse("{world_size}", "an MoE expert group is spread over expert-parallel " + std::to_string(ep) +
                                   " ranks: the data-parallel size must be a multiple of it");
    }
  }

  if (rq.refresh_fp32) {
    if (w == OptimizerWrapper::Zero3) {
      if (!rq.lp_source)
        refuse("{refresh_fp32}",
               "ZeRO-3 model files hold only placeholders, so the fp32 masters cannot be refreshed from the "
               "checkpoint itself; pass {lp_source} FILE with consolidated 16-bit weights (e.g. a "
               "save_16bit_model export, safetensors or torch file)");
      deepspeed::detail::LpReader probe(*make_cpu_backend(1));
      auto keep = deepspeed::detail::add_file_lp(*rq.lp_source, probe);
      for (const auto& g : cat.groups)
        for (const auto& p : g.params) {
          const Tensor* t = probe.find(p.name);
          if (!t)
            refuse("{lp_source}", *rq.lp_source + " has no weight named '" + p.name + "'",
                   ErrorKind::NotFound);
          if (t->numel() != p.numel)
            refuse("{lp_source}",
                   "'" + p.name + "' has " + std::to_string(t->numel()) + " elements in " + *rq.lp_source +
                       " but " + std::to_string(p.numel) + " in the checkpoint",
                   ErrorKind::Inconsistent);
        }
    } else if (w == OptimizerWrapper::FP16UnfusedOptimizer || w == OptimizerWrapper::FP16Optimizer) {
      if (cat.groups.empty())
        refuse("{refresh_fp32}",
               "the fp32 masters of this " + wname +
                   " could not be matched to the module's params (param-mapping-unknown), so none can be "
                   "refreshed",
               ErrorKind::Unsupported);
    } else if (!zero12_like(w)) {
      refuse("{refresh_fp32}", "refreshing fp32 masters of " + wname + " checkpoints is not supported",
             ErrorKind::Unsupported);
    }
    std::string where = "16-bit module weights";
    if (topo.pipeline) where = "16-bit weights in the pipeline layer files";
    if (topo.moe()) where += " and expert files";
    plan.actions.push_back(
        "refresh fp32 masters from the " + std::string(rq.lp_source ? "weights in " + *rq.lp_source : where) +
        " (" + std::to_string(cat.file_group_count()) +
        (cat.file_group_count() == 1 ? " group on " : " groups on ") + std::to_string(dp) +
        (dp == 1 ? " rank" : " ranks") +
        (slices.size() > 1 ? " of each of " + std::to_string(slices.size()) + " model-parallel ranks" : "") +
        ")" + (rq.reset_optimizer ? "" : "; optimizer moments unchanged"));
    for (const auto& sl : slices) {
      const auto& sc = sl->catalog();
      const std::string label = sc.slice_label().empty() ? "" : sc.slice_label() + ", ";
      if (w ==
          OptimizerWrapper::FP16UnfusedOptimizer) {  // one unpartitioned master per param, in the model file
        for (const auto& g : sc.groups)
          plan.changed_tensors.push_back(label + "optimizer.fp32_groups: " + g.params.front().name);
        continue;
      }
      if (w == OptimizerWrapper::FP16Optimizer) {  // one flat master per param group, in the model file
        for (const auto& g : sc.groups)
          plan.changed_tensors.push_back(label + "optimizer.fp32_groups_flat[" + std::to_string(g.index) +
                                         "]");
        continue;
      }
      for (int r = 0; r < dp; ++r)
        for (int g = 0; g < sc.file_group_count(); ++g)
          plan.changed_tensors.push_back(
              label + "rank " + std::to_string(r) +
              (w == OptimizerWrapper::Zero3 ? " fp32_flat_groups[" : " single_partition_of_fp32_groups[") +
              std::to_string(g) + "]");
    }
  }
  if (rq.reset_optimizer) {
    if (!(zero12_like(w) || w == OptimizerWrapper::Zero3 || w == OptimizerWrapper::FP16Optimizer))
      refuse("{reset_optimizer}", "resetting the optimizer of " + wname + " checkpoints is not supported",
             ErrorKind::Unsupported);
    plan.actions.push_back(
        "reset the optimizer: empty Adam state (moments re-created at the next step), 'step' "
        "removed from param_groups; fp32 masters and weights kept");
    plan.changed_tensors.push_back("every rank's optimizer state (removed)");
  }
  if (rq.drop_optimizer) {
    if (!zero12_like(w) && w != OptimizerWrapper::FP16Optimizer &&
        w != OptimizerWrapper::FP16UnfusedOptimizer && w != OptimizerWrapper::TorchOptimizer)
      refuse("{drop_optimizer}", w == OptimizerWrapper::Zero3
                                     ? "ZeRO-3 keeps the trainable weights only in the optimizer files "
                                       "(model files hold placeholders); "
                                       "dropping them would lose the model. Use {reset_optimizer} instead"
                                     : "this checkpoint has no optimizer state to drop");
    plan.actions.push_back(
        "drop the optimizer: model files only; load with load_optimizer_states=False "
        "(DeepSpeed >= 0.13 then refreshes fp32 masters from the weights)");
  }
  if (rq.world_size) {
    if (!zero12_like(w) && w != OptimizerWrapper::Zero3)
      refuse("{repartition}", "re-partitioning " + wname + " checkpoints is not supported",
             ErrorKind::Unsupported);
    if (w == OptimizerWrapper::Zero3) {
      const auto* mf = cat.metadata_model_file();
      const Value* frag =
          mf ? ckpt.model_file(mf->mp_rank, std::max(mf->dp_rank, 0)).root.get("frozen_param_fragments")
             : nullptr;
      if (frag && frag->is_dict() && !frag->as_dict().items.empty())
        refuse("{repartition}", "ZeRO-3 checkpoints with frozen params are not supported by repartition yet",
               ErrorKind::Unsupported);
    }
    plan.actions.push_back(
        "re-partition from data-parallel " + std::to_string(dp) + " to " + std::to_string(*rq.world_size) +
        (slices.size() > 1 ? " within each of " + std::to_string(slices.size()) +
                                 " model-parallel ranks (tensor and pipeline layout kept)"
                           : std::string()) +
        (topo.moe() ? "; expert groups keep expert-parallel " + std::to_string(topo.ep) : std::string()) +
        " (fp32 masters, Adam moments, group paddings, param_slice_mappings; group_paddings per "
        "ds_version " +
        (cat.ds_version.empty() ? std::string("(none)") : cat.ds_version) + ")");
  }
  if (rq.target) {
    if (!zero12_like(w))
      refuse("{target}", "grafting is supported for ZeRO-1/2 and BF16_Optimizer checkpoints",
             ErrorKind::Unsupported);
    auto t = deepspeed::Checkpoint::open(*rq.target);
    const auto& tc = t->catalog();
    if (!zero12_like(tc.wrapper))
      refuse("{target}",
             "the template is a " + std::string(deepspeed::wrapper_name(tc.wrapper)) +
                 " checkpoint; a ZeRO-1/2 or BF16_Optimizer one is needed",
             ErrorKind::Unsupported);
    if (tc.lp_dtype != cat.lp_dtype)
      refuse("{target}", "the template's 16-bit dtype differs from the checkpoint's",
             ErrorKind::Inconsistent);
    for (const auto& p : tc.problems)
      if (p.severity == model::Severity::Error &&
          !(p.code == model::code_name(model::Code::UnsafePickle) && rq.allow_unsafe_pickle))
        refuse("{target}",
               "the template has a problem: " + p.code + ": " + p.message +
                   (p.code == model::code_name(model::Code::UnsafePickle)
                        ? " (pass {allow_unsafe_pickle} to write it anyway)"
                        : ""),
               p.code == model::code_name(model::Code::UnsafePickle) ? ErrorKind::UnsafePickle
                                                                     : ErrorKind::Inconsistent);
    std::vector<std::string> changed, added;
    for (const auto& g : tc.groups)
      for (const auto& p : g.params) {
        const auto gp = cat.find_param(p.name);
        if (!gp) {
          added.push_back(p.name);
          continue;
        }
        const auto& sp = cat.groups[static_cast<size_t>(gp->first)].params[static_cast<size_t>(gp->second)];
        if (sp.shape != p.shape) changed.push_back(p.name);
      }
    if (!changed.empty() && !rq.allow_shape_change) {
      std::string list;
      for (const auto& n : changed) list += " " + n;
      refuse("{target}",
             "params changed shape:" + list + " (pass {allow_shape_change} to keep the template's values)",
             ErrorKind::Inconsistent);
    }
    for (const auto& g : cat.groups)
      for (const auto& p : g.params)
        if (!tc.find_param(p.name))
          plan.warnings.push_back("param '" + p.name + "' is not in the template; dropped");
    for (const auto& n : changed)
      plan.warnings.push_back("param '" + n + "' changed shape; the template's values are kept");
    if (!added.empty() && !rq.reset_optimizer)
      plan.warnings.push_back(request_text(
          std::to_string(added.size()) +
          " new params start with zero Adam moments while their group's step continues, so their "
          "first updates are larger than lr (bias correction); diagnose reports this as "
          "new-params-zero-moments (a warning). Add {reset_optimizer} to restart all moments together"));
    plan.actions.push_back("graft onto the template " + tc.save_dir + " (data-parallel " +
                           std::to_string(tc.groups.empty() ? 0 : tc.groups.front().partitions.size()) +
                           ", " + std::to_string(added.size()) +
                           " new params with the template's values and zero moments)");
    for (const auto& f : tc.files) {
      if (f.role != FileRole::Model && f.role != FileRole::Optim) continue;
      plan.files.push_back({tc.tag + "/" + f.path, "write", f.bytes, "template layout"});
      plan.bytes_to_write += f.bytes;
    }
    plan.tag = tc.tag;
    plan.files.push_back({"latest", "write", plan.tag.size(), "written last"});
    return plan;
  }

  std::vector<int>& restored = plan.restored_ranks;  // ranks whose model file a restore writes
  int& restore_from = plan.restore_from;
  if (rq.restore_model_files) {
    if (w != OptimizerWrapper::Zero3)
      refuse("{restore_model_files}",
             "only ZeRO-3 saves a model file per data-parallel rank; this checkpoint's optimizer is " + wname,
             ErrorKind::Unsupported);
    if (parallel)
      refuse("{restore_model_files}", "tensor/pipeline/expert-parallel ZeRO-3 checkpoints are not supported",
             ErrorKind::Unsupported);
    if (!cat.frozen_params.empty())
      refuse("{restore_model_files}",
             std::to_string(cat.frozen_params.size()) +
                 " frozen params: each rank's ZeRO-3 model file holds its own fragments of them "
                 "(frozen_param_fragments), which a copy of another rank's file would replace",
             ErrorKind::Unsupported);
    for (int r = 0; r < dp; ++r) {
      if (cat.model_file(-1, r))
        restore_from = restore_from < 0 ? r : restore_from;
      else
        restored.push_back(r);
    }
    if (restored.empty())
      refuse("{restore_model_files}", "every rank's model file is here: nothing to restore");
    if (restore_from < 0) refuse("{restore_model_files}", "no rank's model file is here to copy");
    std::string ranks;
    for (int r : restored) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    plan.actions.push_back(
        "restore the model file of rank(s) " + ranks + " as a copy of rank " + std::to_string(restore_from) +
        "'s (a ZeRO-3 job's ranks save the same model file); every other file copied as it is");
  }

  // Files.
  for (const auto& f : cat.files) {
    PlannedFile pf;
    pf.path = cat.tag + "/" + f.path;
    pf.bytes = f.bytes;
    if (rq.restore_model_files) {
      pf.action = "copy";
    } else if (f.role == FileRole::Optim) {
      if (rq.drop_optimizer) continue;
      if (rq.world_size) continue;  // regenerated below
      pf.action = "rewrite";
      pf.why = rq.refresh_fp32 && rq.reset_optimizer ? "fp32 refreshed, optimizer reset"
               : rq.refresh_fp32                     ? "fp32 refreshed"
                                                     : "optimizer reset";
    } else if (f.role == FileRole::Model) {
      if (rq.world_size) {
        if (w == OptimizerWrapper::Zero3) continue;
        pf.action = "rewrite";
        pf.why = "dp_world_size " + std::to_string(*rq.world_size);
      } else if (w == OptimizerWrapper::FP16Optimizer &&
                 (rq.reset_optimizer || rq.drop_optimizer || rq.refresh_fp32)) {
        pf.action = "rewrite";
        pf.why = rq.drop_optimizer    ? "optimizer removed"
                 : rq.reset_optimizer ? "optimizer reset"
                                      : "fp32 refreshed";
      } else if (w == OptimizerWrapper::FP16UnfusedOptimizer && rq.refresh_fp32) {
        pf.action = "rewrite";
        pf.why = "fp32 refreshed";
      } else {
        pf.action = "copy";
      }
    } else {
      pf.action = "copy";
      pf.why = kNotReadByDeepSpeed;
    }
    plan.bytes_to_write += pf.bytes;
    plan.files.push_back(pf);
  }
  if (rq.world_size) {
    const int n = *rq.world_size;
    for (const auto& sl : slices) {
      const auto& sc = sl->catalog();
      const int m = sc.mp_rank;
      uint64_t per_rank = 0;
      if (const CheckpointFile* f0 = sc.optim_file(0)) per_rank = f0->bytes * static_cast<uint64_t>(dp) / n;
      const bool bf16 = sc.optim_file(0) && sc.optim_file(0)->bf16_prefix;
      const std::string label = sc.slice_label().empty() ? "" : sc.slice_label() + ", ";
      for (int r = 0; r < n; ++r) {
        if (w == OptimizerWrapper::Zero3) {
          plan.files.push_back({cat.tag + "/" + deepspeed::model_file_name(3, r, m), "write", 0,
                                label + "rank " + std::to_string(r)});
        }
        plan.files.push_back({cat.tag + "/" + deepspeed::optim_file_name(bf16, r, m), "write", per_rank,
                              label + "rank " + std::to_string(r) + " of " + std::to_string(n)});
        plan.bytes_to_write += per_rank;
        plan.changed_tensors.push_back(label + "rank " + std::to_string(r) +
                                       ": fp32 partitions and moments (new layout)");
      }
    }
  }
  for (int r : restored) {
    const auto* from = cat.model_file(-1, restore_from);
    plan.files.push_back({cat.tag + "/" + deepspeed::model_file_name(3, r), "write", from->bytes,
                          "copy of rank " + std::to_string(restore_from) + "'s model file"});
    plan.bytes_to_write += from->bytes;
  }
  for (const auto& name : deepspeed::trainer_folder_files(cat.save_dir)) {
    std::error_code ec;
    const uint64_t bytes = std::filesystem::file_size(std::filesystem::path(cat.save_dir) / name, ec);
    plan.files.push_back({name, "copy", ec ? 0 : bytes, "the Trainer's, for resume_from_checkpoint"});
    plan.bytes_to_write += ec ? 0 : bytes;
  }
  plan.files.push_back({"latest", "write", cat.tag.size(), "written last"});
  return plan;
}

}  // namespace ckptdoc::repair
