// Catalog of a universal checkpoint folder (deepspeed-format.md §7): the model-states file the converter
// copied, zero/optimizer_state.pt and one folder of whole tensors per trainable param. Each param becomes its
// own flat group with one unpartitioned rank 0, so diagnose, export, the views and convert read it like any
// checkpoint. Reads pickles and zip directories only (each param file's pickle is tiny), no tensor bytes.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/short_list.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/universal_folder.h"
#include "sources/deepspeed/value_access.h"

namespace fs = std::filesystem;

namespace ckptdoc::deepspeed {

using namespace detail;

namespace {

std::string num(int64_t x) {
  return std::to_string(x);
}

// A saved step as a count; nullopt for values no counter holds (damaged files).
std::optional<int64_t> step_count(std::optional<double> v) {
  if (!v || !(*v >= 0.0 && *v <= 9.0e15)) return std::nullopt;
  return static_cast<int64_t>(*v);
}

// The tensor of a param state file: ds_to_universal's {'cat_dim': d, 'param': tensor} or ZeRO-3's raw tensor.
const Value* state_tensor(const Value& root) {
  if (root.is_tensor()) return &root;
  const Value* p = dict_get(&root, "param");
  return p && p->is_tensor() ? p : nullptr;
}

struct UniversalParam {
  std::string name;
  std::vector<int64_t> shape;
  int optimizer_group = 0;
};

}  // namespace

void CatalogBuilder::build_universal() {
  list_files();  // the model-states file(s) the converter copied
  read_model_file();
  UniversalInfo u;
  u.zero_dir = cat_.tag_dir + "/zero";
  u.source_dp_world_size = cat_.dp_world_size;
  const Value* mroot = model_ ? &model_->root : nullptr;
  u.iteration = opt_int(dict_get(mroot, "iteration"));
  u.has_universal_checkpoint_info = dict_get(mroot, "universal_checkpoint_info") != nullptr;
  std::error_code ec;

  // zero/optimizer_state.pt: rank 0's optimizer globals (loss scaler, ds_version, zero_stage, param_groups).
  const Value* osd = nullptr;
  {
    CheckpointFile f;
    f.path = "zero/optimizer_state.pt";
    f.abs_path = u.zero_dir + "/optimizer_state.pt";
    if (fs::is_regular_file(f.abs_path, ec)) {
      f.bytes = fs::file_size(f.abs_path, ec);
      cat_.files.push_back(f);
      if (const TorchFile* tf = try_open(cat_.files.back())) {
        osd = &tf->root;
        if (!osd->is_dict()) {
          problem(model::Code::UnknownSchema,
                  f.path + " does not hold a dict (found " + osd->type_name() + ")", f.path);
          osd = nullptr;
        }
      }
    } else {
      problem(model::Code::UniversalParamMissing,
              "zero/optimizer_state.pt is missing: DeepSpeed's universal loader reads the optimizer's global "
              "state "
              "(ds_version, loss scaler, param_groups) from it and stops without it. Convert the checkpoint "
              "again.",
              f.path);
    }
  }
  const Value* config = dict_get(mroot, "ds_config");
  const auto config_stage = opt_int(dict_get(dict_get(config, "zero_optimization"), "stage"));
  std::optional<int> stage;
  if (const Value* zs = dict_get(osd, "zero_stage")) {
    stage = zero_stage_of(*zs);
    if (!stage)
      if (auto i = opt_int(zs)) stage = static_cast<int>(*i);
  }
  if (dict_get(osd, "fp32_flat_groups") || stage == 3 || (!osd && config_stage == 3)) {
    cat_.wrapper = OptimizerWrapper::Zero3;
    cat_.zero_stage = 3;
  } else if (stage || !osd) {
    cat_.wrapper = OptimizerWrapper::Zero12;
    cat_.zero_stage = config_stage && (*config_stage == 1 || *config_stage == 2)
                          ? static_cast<int>(*config_stage)
                          : stage.value_or(2);
  } else {
    cat_.wrapper = OptimizerWrapper::BF16Optimizer;  // its state dict has no zero_stage (§4.3)
    cat_.zero_stage = static_cast<int>(config_stage.value_or(0));
  }
  if (cat_.ds_version.empty()) cat_.ds_version = opt_str(dict_get(osd, "ds_version")).value_or("");
  const bool zero3 = cat_.wrapper == OptimizerWrapper::Zero3;
  u.zero3 = zero3;
  if (zero3)
    u.zero3_step = step_count(
        scalar_value(dict_get(int_key(dict_get(dict_get(osd, "optimizer_state_dict"), "state"), 0), "step")));
  u.version =
      opt_float(dict_get(dict_get(mroot, "universal_checkpoint_info"), "universal_checkpoint_version"));
  // Hyper-parameters: ds_to_universal 0.14.1+ adds the torch param_groups; ZeRO-3's whole state dict has its
  // own.
  const Value* pgroups = dict_get(osd, "param_groups");
  u.has_param_groups = pgroups && pgroups->is_sequence();
  if (!u.has_param_groups) pgroups = dict_get(dict_get(osd, "optimizer_state_dict"), "param_groups");

  // The trainable params, in flat order, from the model file's param_shapes (one OrderedDict per group, or
  // per ZeRO-3 sub-group); without a model file, from the folders.
  std::vector<UniversalParam> params;
  const Value* shapes = dict_get(mroot, "param_shapes");
  auto sub_group_owner = [&](int sub) {
    for (size_t i = 0; pgroups && pgroups->is_sequence() && i < pgroups->items().size(); ++i)
      if (const Value* ids = dict_get(&pgroups->items()[i], "params"); ids && ids->is_sequence())
        for (const auto& id : ids->items())
          if (opt_int(&id) == sub) return static_cast<int>(i);
    return sub;
  };
  if (shapes && shapes->is_sequence()) {
    for (size_t g = 0; g < shapes->items().size(); ++g)
      for (const auto& [name, v] : str_items(&shapes->items()[g]))
        params.push_back({name, shape_of(v).value_or(std::vector<int64_t>{}),
                          zero3 ? sub_group_owner(static_cast<int>(g)) : static_cast<int>(g)});
  } else if (shapes && shapes->is_dict()) {
    for (const auto& [name, v] : str_items(shapes))
      params.push_back({name, shape_of(v).value_or(std::vector<int64_t>{}), 0});
  }
  // A pipeline-parallel job's other stages (each mp rank's model file lists its own stage's params; tensor
  // ranks repeat the names of their stage).
  if (shapes && shapes->is_sequence() && cat_.mp_world_size > 1) {
    std::set<std::string> known;
    for (const auto& p : params) known.insert(p.name);
    const CheckpointFile* own = cat_.metadata_model_file();
    for (const auto& f : cat_.files) {
      if (f.role != FileRole::Model || &f == own || f.path.find('/') != std::string::npos) continue;
      const TorchFile* tf = try_open(f);
      const Value* more = tf ? dict_get(&tf->root, "param_shapes") : nullptr;
      if (!more || !more->is_sequence()) continue;
      for (size_t g = 0; g < more->items().size(); ++g)
        for (const auto& [name, v] : str_items(&more->items()[g]))
          if (known.insert(name).second)
            params.push_back({name, shape_of(v).value_or(std::vector<int64_t>{}), static_cast<int>(g)});
    }
  }
  std::set<std::string> folders;
  for (fs::directory_iterator it(u.zero_dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) folders.insert(it->path().filename().string());
  if (params.empty() && !folders.empty()) {
    problem(model::Code::UniversalParamMissing,
            "the model-states file lists no trainable params (param_shapes); the param folders under zero/ "
            "are read "
            "without knowing their model shapes or groups");
    for (const auto& f : folders) params.push_back({f, {}, 0});
  }
  const bool tensor_parallel = cat_.mp_world_size > 1;
  if (tensor_parallel)
    problem(
        model::Code::UniversalTensorParallel,
        "the checkpoint was tensor-parallel (mp_world_size " + num(cat_.mp_world_size) +
            "): the universal tensors hold merged params, so their shapes are not checked against this model "
            "file's slices and the 16-bit weights are not compared");

  // Each param's folder: which states it holds, their shapes, its step.
  std::vector<std::string> missing_folder, shape_wrong;
  std::map<std::string, std::vector<std::string>> missing_state;  // state -> params
  std::set<std::string> moment_keys;
  for (size_t k = 0; k < params.size(); ++k) {
    const UniversalParam& p = params[k];
    UniversalParamFiles pf;
    pf.name = p.name;
    pf.optimizer_group = p.optimizer_group;
    const std::string folder = u.zero_dir + "/" + p.name;
    if (!fs::is_directory(folder, ec)) {
      missing_folder.push_back(p.name);
      u.params.push_back(std::move(pf));
      continue;
    }
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string file = it->path().filename().string();
      if (!it->is_regular_file(ec) || file.size() <= 3 || file.compare(file.size() - 3, 3, ".pt") != 0)
        continue;
      pf.states.push_back(file.substr(0, file.size() - 3));
    }
    std::sort(pf.states.begin(), pf.states.end());
    for (const auto& state : pf.states) {
      CheckpointFile f;
      f.path = "zero/" + p.name + "/" + state + ".pt";
      f.abs_path = state_file(u.zero_dir, p.name, state);
      f.bytes = fs::file_size(f.abs_path, ec);
      cat_.files.push_back(f);
      pf.ids.emplace_back();
      // Not cached: a large model's folders hold more files than a process can keep mapped.
      const auto tf = try_open_transient(cat_.files.back());
      if (!tf) continue;
      pf.ids.back() = {tf->file->size(), tf->file->device(), tf->file->inode()};
      if (state == "step") {
        pf.step = step_count(scalar_value(&tf->root));
        if (!pf.step)
          problem(model::Code::UnknownSchema,
                  f.path + " holds no step count (found " + tf->root.repr(60) + ")", f.path, {}, {p.name});
        continue;
      }
      if (state != "fp32") moment_keys.insert(state);
      const Value* t = state_tensor(tf->root);
      if (!t) {
        problem(model::Code::UnknownSchema,
                f.path + " holds neither a tensor nor a {'param': tensor} dict (found " +
                    tf->root.type_name() + ")",
                f.path, {}, {p.name});
        continue;
      }
      if (state == "fp32") pf.cat_dim = opt_int(dict_get(&tf->root, "cat_dim"));
      const std::vector<int64_t>& got = t->as_tensor().shape;
      const bool raw = tf->root.is_tensor();  // ZeRO-3: a flat tensor of the param's numel
      const bool ok = p.shape.empty() && !shapes ? true
                      : raw                      ? t->as_tensor().numel() == shape_numel(p.shape)
                                                 : got == p.shape;
      if (!ok && !tensor_parallel) {
        const bool vocab = opt_bool(dict_get(&tf->root, "vocab_tensor")).value_or(false);
        // An unpadded vocabulary tensor is how DeepSpeed saves it: info, not the table's error.
        problem(model::Code::ShapeMismatch, vocab ? model::Severity::Info : model::Severity::Error,
                f.path + " holds a tensor of shape " + shape_text(got) + " but param_shapes says " +
                    shape_text(p.shape) +
                    (vocab ? " (a vocabulary tensor stored without its padding; DeepSpeed pads it again on "
                             "load; not "
                             "compared)"
                           : ": DeepSpeed's loader would fail or scramble it"),
                f.path, {}, {p.name});
        if (!vocab) shape_wrong.push_back(p.name);
      }
    }
    u.params.push_back(std::move(pf));
  }
  for (auto& pf : u.params) {
    if (!fs::is_directory(u.zero_dir + "/" + pf.name, ec)) continue;
    auto has = [&pf](const std::string& s) {
      return std::find(pf.states.begin(), pf.states.end(), s) != pf.states.end();
    };
    if (!has("fp32")) missing_state["fp32.pt"].push_back(pf.name);
    for (const auto& m : moment_keys)
      if (!has(m)) missing_state[m + ".pt"].push_back(pf.name);
  }
  // 0.19's ds_to_universal.py writes the module's buffers and frozen params as zero/<name>/fp32.pt too; its
  // loaders skip them, as they skip any folder that names no trainable param.
  std::set<std::string> module_entries;
  for (const auto& [name, v] : str_items(dict_get(mroot, "module"))) module_entries.insert(name);
  for (const auto& name : folders) {
    if (std::any_of(params.begin(), params.end(), [&](const UniversalParam& p) { return p.name == name; }))
      continue;
    if (module_entries.contains(name))
      u.module_entry_folders.push_back(name);
    else
      u.unexpected_folders.push_back(name);
  }

  if (!missing_folder.empty())
    problem(model::Code::UniversalParamMissing,
            num(static_cast<int64_t>(missing_folder.size())) +
                " trainable param(s) have no folder under zero/ (" + short_list(missing_folder, 6) +
                "): DeepSpeed's universal loader opens zero/<param>/ for every trainable param of the job's "
                "model and "
                "stops at the first one missing. Convert the checkpoint again, or from a checkpoint that has "
                "them.",
            "zero/", {}, missing_folder);
  for (const auto& [file, names] : missing_state)
    problem(
        model::Code::UniversalParamMissing,
        num(static_cast<int64_t>(names.size())) + " param folder(s) lack " + file + " (" +
            short_list(names, 6) +
            "), which the other params have: DeepSpeed's loader needs the same state files in every folder.",
        "zero/", {}, names);
  if (!u.unexpected_folders.empty())
    problem(model::Code::UniversalExtraParams,
            num(static_cast<int64_t>(u.unexpected_folders.size())) +
                " folder(s) under zero/ name no trainable param of "
                "the model file (" +
                short_list(u.unexpected_folders, 6) + "); DeepSpeed's loader ignores them.",
            "zero/", {}, u.unexpected_folders);

  // One flat group per param, one unpartitioned rank.
  for (size_t k = 0; k < params.size(); ++k) {
    GroupLayout g;
    g.index = static_cast<int>(k);
    ParamEntry e;
    e.name = params[k].name;
    e.shape = params[k].shape;
    e.numel = shape_numel(e.shape);
    g.numel = g.padded_numel = g.partition_numel = e.numel;
    g.params.push_back(e);
    RankPartition rp;
    rp.rank = 0;
    const auto& st = u.params[k].states;
    rp.saved_numel = std::find(st.begin(), st.end(), "fp32") != st.end() ? e.numel : 0;
    rp.real_numel = e.numel;
    rp.fragments.push_back(Fragment{0, 0, 0, e.numel});
    g.partitions.push_back(std::move(rp));
    cat_.groups.push_back(std::move(g));
  }
  cat_.dp_world_size = 0;  // any: a universal checkpoint is not partitioned
  cat_.optim_file_count = osd ? 1 : 0;
  index_metadata_model_file();
  if (!tensor_parallel) {
    locate_lp_weights();  // the module file beside zero/ holds the 16-bit weights
    check_module_shapes();
  }
  if (osd) read_optimizer_summary(osd);  // loss scaler (and, for ZeRO-3, rank 0's own state)

  // Per flat group (= param): the step DeepSpeed's loader will give it and its group's betas.
  const Value* cfg_betas = dict_get(dict_get(dict_get(config, "optimizer"), "params"), "betas");
  u.has_step_files = !u.params.empty();
  cat_.optimizer_groups.assign(u.params.size(), OptimizerGroupState{});
  std::map<int, std::set<int64_t>> group_steps;
  for (size_t k = 0; k < u.params.size(); ++k) {
    const auto& pf = u.params[k];
    auto& og = cat_.optimizer_groups[k];
    og.has_state = std::any_of(pf.states.begin(), pf.states.end(),
                               [](const std::string& s) { return s != "fp32" && s != "step"; });
    // a param without a folder is reported as missing, not as a missing step on top
    u.has_step_files = u.has_step_files && (pf.step.has_value() || pf.states.empty());
    og.step = pf.step        ? pf.step
              : u.zero3_step ? u.zero3_step
              : u.iteration  ? std::optional<int64_t>(*u.iteration + 1)
                             : std::nullopt;
    if (pf.step) group_steps[pf.optimizer_group].insert(*pf.step);
    const Value* betas =
        dict_get(list_at(pgroups, static_cast<size_t>(std::max(pf.optimizer_group, 0))), "betas");
    if (!betas) betas = cfg_betas;
    const auto b1 = opt_float(list_at(betas, 0)), b2 = opt_float(list_at(betas, 1));
    if (b1 && *b1 >= 0.0 && *b1 < 1.0) og.beta1 = *b1;
    if (b2 && *b2 >= 0.0 && *b2 < 1.0) og.beta2 = *b2;
  }
  cat_.optimizer_step = cat_.optimizer_groups.empty() ? std::nullopt : cat_.optimizer_groups.front().step;
  cat_.optimizer_state_keys.assign(moment_keys.begin(), moment_keys.end());
  for (const auto& [g, steps] : group_steps)
    if (steps.size() > 1) {
      problem(model::Code::OptimizerStepInconsistent,
              "the params of optimizer group " + num(g) + " hold different steps in their step.pt (" +
                  num(*steps.begin()) + " … " + num(*steps.rbegin()) +
                  "): DeepSpeed's universal loader requires one step per group and stops. Convert the "
                  "checkpoint again.");
      // Steps that differ on disk are fixed by converting again, not by a reset of a universal checkpoint.
      cat_.problems.back().repair = model::RepairKind::None;
    }

  // Which universal loaders accept the folder: 0.12.3-0.14.0 need `iteration`, 0.14.1+ need step.pt files and
  // param_groups.
  const bool old_ok = u.loads_with_iteration(), new_ok = u.loads_with_step_files();
  if (zero3 && !u.has_step_files) {
    if (!u.zero3_step)
      problem(
          model::Code::UniversalStepMissing,
          "no Adam step for DeepSpeed's ZeRO-3 universal loader: it reads "
          "zero/optimizer_state.pt['optimizer_state_dict']['state'][0]['step'] (the param folders hold no "
          "step.pt, as ds_to_universal.py writes them for ZeRO-3) and stops without it",
          "zero/optimizer_state.pt");
  } else if (!old_ok && !new_ok) {
    problem(
        model::Code::UniversalStepMissing,
        std::string(
            "no DeepSpeed universal loader can restore the optimizer step: the model file has no `iteration` "
            "(DeepSpeed 0.12.3-0.14.0 set the step to client_state['iteration'] + 1 and raise KeyError "
            "without it) and ") +
            (u.has_step_files ? "zero/optimizer_state.pt has no param_groups"
                              : "the param folders hold no step.pt") +
            " (what 0.14.1+ read). Convert again with ckptdoc convert --to universal, which writes both.");
  } else if (!old_ok || !new_ok) {
    problem(
        model::Code::UniversalLoaderVersions,
        old_ok
            ? "loads with DeepSpeed 0.12.3-0.14.0 only (step := iteration + 1); 0.14.1+ need step.pt in "
              "every "
              "param folder and param_groups in zero/optimizer_state.pt"
            : "loads with DeepSpeed 0.14.1+ only; 0.12.3-0.14.0 set the step from client_state['iteration'], "
              "which the model file does not hold");
  }
  if (old_ok && u.has_step_files && !u.params.empty() && u.params.front().step &&
      *u.iteration + 1 != *u.params.front().step)
    problem(model::Code::UniversalIterationMismatch,
            "iteration + 1 = " + num(*u.iteration + 1) + " but step.pt holds " + num(*u.params.front().step) +
                ": DeepSpeed 0.12.3-0.14.0 would resume Adam at the wrong step (bias correction off); "
                "0.14.1+ use "
                "step.pt");
  if (!cat_.buffer_names.empty() || !cat_.frozen_params.empty())
    problem(model::Code::UniversalModuleNotLoaded,
            "DeepSpeed's universal loader skips the module state dict: trainable params come from "
            "zero/*/fp32.pt, but " +
                num(static_cast<int64_t>(cat_.buffer_names.size())) + " buffer(s) and " +
                num(static_cast<int64_t>(cat_.frozen_params.size())) +
                " frozen param(s) keep the values of the model the job builds");
  cat_.universal = std::move(u);
}

void CatalogBuilder::note_universal_beside() {
  std::error_code ec;
  const fs::path lu = fs::path(cat_.save_dir) / "latest_universal";
  if (!fs::is_regular_file(lu, ec)) return;
  std::string t;
  if (auto f = std::ifstream(lu); f) std::getline(f, t);
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  if (t.empty() || t == cat_.tag || t.find('/') != std::string::npos || t == ".." ||
      !fs::is_directory(fs::path(cat_.save_dir) / t, ec))
    return;
  problem(model::Code::UniversalCheckpointBeside,
          "this save folder also holds a universal checkpoint: latest_universal names " + t +
              " (read it with --tag " + t +
              "; DeepSpeed loads it with \"checkpoint\": {\"load_universal\": true})");
}

}  // namespace ckptdoc::deepspeed
