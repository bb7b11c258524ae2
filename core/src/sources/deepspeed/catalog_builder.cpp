// Catalog building, part 1: locating the tag folder, file roles, opening files, the model-states file.
#include "sources/deepspeed/catalog_builder.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/number_text.h"
#include "ckptdoc/sources/deepspeed/rank_owners.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "sources/deepspeed/catalog_bounds.h"
#include "sources/deepspeed/catalog_topology.h"
#include "sources/deepspeed/detect.h"
#include "sources/deepspeed/file_roles.h"
#include "sources/deepspeed/universal_folder.h"
#include "sources/deepspeed/value_access.h"

namespace fs = std::filesystem;

namespace ckptdoc::deepspeed {

using namespace detail;

void CatalogBuilder::problem(model::Code code, std::string message, std::string file, std::vector<int> ranks,
                             std::vector<std::string> params) {
  problem(code, model::default_severity(code), std::move(message), std::move(file), std::move(ranks),
          std::move(params));
}

void CatalogBuilder::problem(model::Code code, model::Severity severity, std::string message,
                             std::string file, std::vector<int> ranks, std::vector<std::string> params) {
  cat_.problems.emplace_back(code, severity, std::move(message), std::move(file), std::move(ranks),
                             std::move(params));
}

void CatalogBuilder::build(const std::string& path, const OpenOptions& options) {
  ck_.snapshot_ = snapshot::Snapshot::open_if_snapshot(path, options.tag);  // a live-engine snapshot's files
  const Location loc =
      ck_.snapshot_
          ? Location{ck_.snapshot_->dir(), ck_.snapshot_->manifest().tag, ck_.snapshot_->dir(), false, {}}
          : locate_checkpoint(path, options.tag);
  cat_.save_dir = loc.save_dir;
  cat_.tag = loc.tag;
  cat_.tag_dir = loc.tag_dir;
  cat_.mp_rank = std::max(options.mp_rank, 0);
  if (!loc.opened_below.empty())
    problem(model::Code::OpenedCheckpointBelow, loc.opened_below + " holds no checkpoint itself: opened " +
                                                    cat_.save_dir +
                                                    ", the only DeepSpeed checkpoint below it");
  if (is_universal_folder(cat_.tag_dir)) {
    build_universal();
    return;
  }
  list_files();
  note_nvme_offload();
  recognise_by_content();
  const bool any_rank_file = std::any_of(cat_.files.begin(), cat_.files.end(), [](const CheckpointFile& f) {
    return f.role == FileRole::Model || f.role == FileRole::Optim;
  });
  if (!any_rank_file) {
    throw Error(ErrorKind::NotFound, cat_.tag_dir, "",
                "no model-states or optimizer-states files in the tag folder");
  }
  read_model_file();
  recognise_sequence_parallel_names();
  read_topology();
  scan_optim_files();
  if (!model_ && std::none_of(optim_.begin(), optim_.end(), [](const auto& kv) { return kv.second.file; })) {
    throw Error(ErrorKind::Corrupt, cat_.tag_dir, "",
                "no readable model-states or optimizer-states file (see the problems above)");
  }
  decide_wrapper();
  check_world_sizes();
  const AutoEpOutcome autoep = autoep_layout();
  autoep_refused_ = autoep == AutoEpOutcome::Refused;
  if (autoep == AutoEpOutcome::None) build_groups();
  if (cat_.wrapper == OptimizerWrapper::FP16UnfusedOptimizer) build_unfused_groups();
  if (cat_.wrapper == OptimizerWrapper::FP16Optimizer && cat_.groups.empty()) build_fused_groups();
  identify_renamed_ranks();
  expand_expert_groups();
  if (cat_.topology.moe()) check_experts();
  check_partitions();
  index_metadata_model_file();
  locate_lp_weights();
  check_module_shapes();
  read_optimizer_summary();
  note_optimizer_not_saved();
  note_model_files_not_saved();
  if (cat_.groups.empty() && cat_.wrapper != OptimizerWrapper::None && !cat_.optimizer_state_keys.empty() &&
      !autoep_refused_) {  // layout-unsupported says why already
    const std::string keys = " (" + std::to_string(cat_.optimizer_state_keys.size()) + " state keys)";
    problem(
        model::Code::LayoutNotAnalysed,
        (cat_.wrapper == OptimizerWrapper::FP16UnfusedOptimizer ||
                 cat_.wrapper == OptimizerWrapper::FP16Optimizer
             ? "the optimizer (" + std::string(wrapper_name(cat_.wrapper)) +
                   ") keeps fp32 params and moments" + keys +
                   " in the model file, but they could not be matched to the module's params (see "
                   "param-mapping-unknown)"
             : "the optimizer (" + std::string(wrapper_name(cat_.wrapper)) +
                   ") keeps fp32 params and moments" + keys + " in a layout ckptdoc does not read yet") +
            ": no fp32 master or moment was compared with anything. The 16-bit weights are readable (export "
            "--source lp)");
  }
  if (loc.from_latest) note_universal_beside();
  report_renamed();
  check_pickle_safety();
  label_problems();
}

void CatalogBuilder::index_metadata_model_file() {
  cat_.metadata_model_index = -1;
  if (const CheckpointFile* mf = cat_.metadata_model_file())
    cat_.metadata_model_index = static_cast<int>(mf - cat_.files.data());
}

void CatalogBuilder::read_topology() {
  const auto model_root = [this](int m) -> const Value* {
    const CheckpointFile* f = cat_.model_file(m, 0);
    if (!f)
      for (const auto& g : cat_.files)
        if (g.role == FileRole::Model && g.mp_rank == m && (!f || g.dp_rank < f->dp_rank)) f = &g;
    if (!f) return nullptr;
    try {
      return &ck_.open_cached(f->abs_path).root;
    } catch (const std::exception&) {
      return nullptr;  // reported by the slice that owns it
    }
  };
  const auto file_root = [this](const CheckpointFile& f) -> const Value* {
    try {
      return &ck_.open_cached(f.abs_path).root;
    } catch (const std::exception&) {
      return nullptr;
    }
  };
  std::vector<Problem> found;
  cat_.topology = derive_topology(cat_.files, model_root, file_root, found);
  if (cat_.mp_rank == 0)  // job-wide: reported once
    for (auto& p : found) job_problems_.push_back(std::move(p));
  const Topology& t = cat_.topology;
  if (cat_.mp_rank >= t.mp_world_size)
    throw Error(ErrorKind::Inconsistent, cat_.tag_dir, "mp rank " + std::to_string(cat_.mp_rank),
                "beyond the job's " + std::to_string(t.mp_world_size) + " model-parallel ranks");
  cat_.pp_stage = t.stage_of(cat_.mp_rank);
  cat_.tp_rank = t.tp_of(cat_.mp_rank);
  assign_file_coordinates(cat_.files, t);
}

void CatalogBuilder::label_problems() {
  const std::string label = cat_.slice_label();
  if (!label.empty())
    for (auto& p : cat_.problems) {
      p.pp = cat_.pp_stage;
      p.tp = cat_.tp_rank;
      p.message = label + ": " + p.message;
    }
  for (auto& p : job_problems_) cat_.problems.push_back(std::move(p));
}

void CatalogBuilder::list_files() {
  if (ck_.snapshot_) {
    cat_.files = ck_.snapshot_->checkpoint_files();  // the DeepSpeed files a snapshot's rank files hold
  } else {
    std::error_code ec;
    for (fs::directory_iterator it(cat_.tag_dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      CheckpointFile f;
      f.path = it->path().filename().string();
      f.abs_path = it->path().string();
      f.bytes = it->file_size(ec);
      if (auto info = classify_file_name(f.path)) {
        f.role = info->role;
        f.dp_rank = info->dp_rank;
        f.mp_rank = info->mp_rank;
        f.bf16_prefix = info->bf16_prefix;
        f.layer = info->layer;
        f.expert = info->expert;
        f.ep = info->ep_rank;
        if (f.role == FileRole::Layer) {  // the name gives the tensor rank; the stage comes from the topology
          f.tp = info->tp_named ? info->mp_rank : -1;
          f.mp_rank = -1;
        }
      }
      cat_.files.push_back(std::move(f));
    }
  }
  sort_files(cat_.files);
}

void sort_files(std::vector<CheckpointFile>& files) {
  std::sort(files.begin(), files.end(), [](const CheckpointFile& a, const CheckpointFile& b) {
    return std::tie(a.role, a.mp_rank, a.dp_rank, a.path) < std::tie(b.role, b.mp_rank, b.dp_rank, b.path);
  });
}

namespace {
// A zip whose end-of-central-directory record is missing was cut short.
bool looks_truncated(const CheckpointFile& f) {
  if (f.bytes == 0) return true;
  std::ifstream in(f.abs_path, std::ios::binary);
  char head[4] = {};
  in.read(head, 4);
  if (std::memcmp(head, "PK\x03\x04", 4) != 0) return false;
  const uint64_t tail = std::min<uint64_t>(f.bytes, 65557);
  std::string buf(tail, '\0');
  in.seekg(static_cast<std::streamoff>(f.bytes - tail));
  in.read(buf.data(), static_cast<std::streamsize>(tail));
  return buf.find(std::string("PK\x05\x06", 4)) == std::string::npos;
}
}  // namespace

const TorchFile* CatalogBuilder::try_open(const CheckpointFile& f) {
  if (reported_empty(f)) return nullptr;
  try {
    return &ck_.open_cached(f.abs_path);
  } catch (const std::exception& e) {
    report_unreadable(f, e);
    return nullptr;
  }
}

std::shared_ptr<const TorchFile> CatalogBuilder::try_open_transient(const CheckpointFile& f) {
  if (reported_empty(f)) return nullptr;
  try {
    return ck_.open_transient(f.abs_path);
  } catch (const std::exception& e) {
    report_unreadable(f, e);
    return nullptr;
  }
}

std::vector<int> CatalogBuilder::ranks_of(const CheckpointFile& f) {
  return f.dp_rank >= 0 ? std::vector<int>{f.dp_rank} : std::vector<int>{};
}

bool CatalogBuilder::reported_empty(const CheckpointFile& f) {
  if (f.bytes != 0) return false;
  problem(model::Code::RankFileTruncated,
          f.path + " is empty (0 bytes); the save was interrupted or the copy failed", f.path, ranks_of(f));
  return true;
}

void CatalogBuilder::report_unreadable(const CheckpointFile& f, const std::exception& e) {
  if (looks_truncated(f))
    problem(model::Code::RankFileTruncated,
            f.path + " is cut short (" + std::to_string(f.bytes) +
                " bytes, no zip directory at the end): " + e.what(),
            f.path, ranks_of(f));
  else
    problem(model::Code::RankFileUnreadable, f.path + " cannot be read: " + e.what(), f.path, ranks_of(f));
}

void CatalogBuilder::read_model_file() {
  const CheckpointFile* mf = cat_.metadata_model_file();
  if (!mf) {
    const std::string mp = two_digits(cat_.mp_rank);
    problem(model::Code::ModelFileMissing, "no model-states file for mp rank " +
                                               std::to_string(cat_.mp_rank) + " (mp_rank_" + mp +
                                               "_model_states.pt or zero_pp_rank_0_mp_rank_" + mp +
                                               "_model_states.pt); buffers, names and steps "
                                               "are unknown");
    return;
  }
  model_ = try_open(*mf);
  if (!model_) return;
  const Value* root = &model_->root;
  if (!root->is_dict()) {
    problem(model::Code::UnknownSchema, mf->path + " does not hold a dict (found " + root->type_name() + ")",
            mf->path);
    model_ = nullptr;
    return;
  }
  if (const Value* module = dict_get(root, "module")) {
    for (const auto& [k, v] : str_items(module)) cat_.module_keys.push_back(k);
  }
  if (const Value* b = dict_get(root, "buffer_names"); b && b->is_sequence()) {
    for (const auto& item : b->items()) {
      if (auto s = opt_str(&item)) cat_.buffer_names.push_back(*s);
    }
  }
  for (const auto& [name, shape_v] : str_items(dict_get(root, "frozen_param_shapes"))) {
    ParamEntry p;
    p.name = name;
    p.shape = shape_of(shape_v).value_or(std::vector<int64_t>{});
    p.numel = checked_numel(p.shape, mf->abs_path, "frozen_param_shapes['" + name + "']");
    cat_.frozen_params.push_back(std::move(p));
  }
  for (const auto& [alias, owner] : str_items(dict_get(root, "shared_params"))) {
    if (auto s = opt_str(owner)) {
      cat_.shared_params[alias] = *s;
      cat_.shared_params_in_order.emplace_back(alias, *s);
    }
  }
  cat_.global_steps = opt_int(dict_get(root, "global_steps")).value_or(0);
  cat_.skipped_steps = opt_int(dict_get(root, "skipped_steps")).value_or(0);
  cat_.global_samples = opt_int(dict_get(root, "global_samples")).value_or(0);
  cat_.dp_world_size = checked_count(opt_int(dict_get(root, "dp_world_size")), 0, kMaxWorldSize, mf->abs_path,
                                     "key 'dp_world_size'");
  cat_.mp_world_size = checked_count(opt_int(dict_get(root, "mp_world_size")), 0, kMaxWorldSize, mf->abs_path,
                                     "key 'mp_world_size'");
  cat_.ds_version = opt_str(dict_get(root, "ds_version")).value_or("");
  const Value* config = dict_get(root, "ds_config");
  if (auto t = opt_str(dict_get(dict_get(config, "optimizer"), "type"))) cat_.optimizer_name_hint = *t;
  if (const Value* sched = dict_get(root, "lr_scheduler")) cat_.lr_scheduler_summary = sched->repr(160);

  // lp dtype: a trainable param's module tensor, else any non-buffer float tensor, else ds_config.
  std::set<std::string> buffers(cat_.buffer_names.begin(), cat_.buffer_names.end());
  std::optional<DType> lp;
  for (const auto& [k, v] : str_items(dict_get(root, "module"))) {
    if (!v->is_tensor() || buffers.count(k) || !is_floating(v->as_tensor().dtype)) continue;
    lp = v->as_tensor().dtype;
    break;
  }
  if (!lp) {
    if (opt_bool(dict_get(dict_get(config, "bf16"), "enabled")).value_or(false)) {
      lp = DType::BF16;
    } else if (opt_bool(dict_get(dict_get(config, "fp16"), "enabled")).value_or(false)) {
      lp = DType::F16;
    }
  }
  cat_.lp_dtype = lp.value_or(DType::F32);

  // Model-file mp ranks: one file per mp rank (ZeRO-3: per (dp, mp)); job-wide, so checked once (mp rank 0).
  if (cat_.mp_world_size > 0 && cat_.mp_rank == 0) {
    std::vector<int> missing;
    for (int m = 0; m < cat_.mp_world_size; ++m) {
      // ZeRO-3 has one per dp rank: any of them stands for the mp rank (dp ranks missing are reported below).
      bool any = false;
      for (const auto& f : cat_.files) any = any || (f.role == FileRole::Model && f.mp_rank == m);
      if (!any) missing.push_back(m);
    }
    if (!missing.empty()) {
      // ZeRO-3 names model files per dp rank too.
      const bool zero3 = std::any_of(cat_.files.begin(), cat_.files.end(), [](const CheckpointFile& f) {
        return f.role == FileRole::Model && f.dp_rank >= 0;
      });
      std::string list;
      for (int m : missing)
        list += (list.empty() ? "" : ", ") + model_file_name(zero3 ? 3 : 0, 0, m) + " (mp rank " +
                std::to_string(m) + ")";
      job_problems_.push_back(
          {model::Code::RankFileMissing,
           "mp_world_size is " + std::to_string(cat_.mp_world_size) + " but " + list +
               (missing.size() > 1 ? " are" : " is") +
               " missing: a tensor or pipeline rank was not saved or copied, and DeepSpeed's "
               "load_checkpoint fails"});  // mp ranks, named in the message (`ranks` holds dp ranks)
    }
  }
}

void CatalogBuilder::check_world_sizes() {
  // dp used for the layout: partition_count (what the optimizer partitioned over), else the model file's
  // dp_world_size, else the number of optimizer files.
  int pc = 0;
  for (const auto& [r, s] : optim_) {
    for (auto c : s.partition_count) pc = std::max(pc, static_cast<int>(c));
    if (pc > 0) break;
  }
  if (pc > 0 && cat_.partition_count.empty()) {
    for (const auto& [r, s] : optim_) {
      if (!s.partition_count.empty()) {
        cat_.partition_count.assign(s.partition_count.begin(), s.partition_count.end());
        break;
      }
    }
  }
  int optim_ranks = 0;
  for (const auto& f : cat_.files) {
    if (f.role == FileRole::Optim && f.mp_rank == cat_.mp_rank) ++optim_ranks;
  }
  cat_.optim_file_count = optim_ranks;
  layout_dp_ = pc > 0 ? pc : (cat_.dp_world_size > 0 ? cat_.dp_world_size : optim_ranks);
  if (cat_.wrapper == OptimizerWrapper::FP16Optimizer ||
      cat_.wrapper == OptimizerWrapper::FP16UnfusedOptimizer ||
      cat_.wrapper == OptimizerWrapper::TorchOptimizer || cat_.wrapper == OptimizerWrapper::None) {
    return;  // no partitioned optimizer files expected
  }
  if (pc > 0 && cat_.dp_world_size > 0 && pc != cat_.dp_world_size) {
    problem(model::Code::WorldSizeMismatch, "the model file says dp_world_size " +
                                                std::to_string(cat_.dp_world_size) +
                                                " but the optimizer files were partitioned over " +
                                                std::to_string(pc) + " ranks (partition_count)");
  }
  const bool stage3 = cat_.wrapper == OptimizerWrapper::Zero3;
  std::vector<int> missing_optim, missing_model, extra;
  for (int r = 0; r < layout_dp_; ++r) {
    if (!cat_.optim_file(r)) missing_optim.push_back(r);
    if (stage3 && !cat_.model_file(-1, r)) missing_model.push_back(r);
  }
  for (const auto& f : cat_.files) {
    if (f.role == FileRole::Optim && f.mp_rank == cat_.mp_rank && f.dp_rank >= layout_dp_)
      extra.push_back(f.dp_rank);
  }
  auto join = [](const std::vector<int>& v) {
    std::string s;
    for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
    return s;
  };
  if (!missing_optim.empty()) {
    cat_.problems.push_back(missing_optim_files_problem(missing_optim, layout_dp_));
  }
  if (!missing_model.empty()) {
    cat_.problems.push_back(missing_zero3_model_files_problem(missing_model, layout_dp_));
  }
  if (!extra.empty()) {
    problem(model::Code::WorldSizeMismatch,
            "optimizer-states file(s) for dp rank(s) " + join(extra) + " beyond the world size " +
                std::to_string(layout_dp_) + " (" + std::to_string(optim_ranks) + " files found)",
            {}, extra);
  } else if (optim_ranks != layout_dp_ && missing_optim.empty()) {
    problem(
        model::Code::WorldSizeMismatch,
        std::to_string(optim_ranks) + " optimizer files but a world size of " + std::to_string(layout_dp_));
  }
}

}  // namespace ckptdoc::deepspeed
