// Catalog building, part 4: where every trainable param's 16-bit weight is (the model file's `module`, a
// pipeline layer file, an MoE expert file), and whether it is there at the shape param_shapes (or the
// optimizer's layout) gives it. A missing layer or expert file is named here.
#include <algorithm>
#include <map>

#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/short_list.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/catalog_topology.h"
#include "sources/deepspeed/module_entries.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

namespace {

std::string n(int64_t x) {
  return std::to_string(x);
}

// The state dict an entry location points into.
const Value* entry_dict(const TorchFile* f, const EntryLocation& loc) {
  if (!f) return nullptr;
  return loc.in_module ? dict_get(&f->root, "module") : &f->root;
}

}  // namespace

void CatalogBuilder::locate_lp_weights() {
  if (cat_.wrapper == OptimizerWrapper::Zero3)
    return;  // its model files hold placeholders, no 16-bit weights
  const Topology& t = cat_.topology;
  for (const auto& G : cat_.groups) {
    for (const auto& p : G.params) {
      if (auto loc = locate_module_entry(cat_, p.name)) {
        cat_.lp_locations[p.name] = {loc->file->path, loc->key};
        continue;
      }
      if (!t.pipeline || p.name.rfind("tied_modules.", 0) != 0) continue;
      // A tied module is saved in the layer file of the (first) layer of this stage that uses it: find the
      // layer file of this tensor rank, not owned by a numbered layer of another stage, that holds the key.
      const std::string rest = p.name.substr(p.name.find('.', 13) + 1);
      for (const auto& f : cat_.files) {
        if (f.role != FileRole::Layer || std::max(f.tp, 0) != cat_.tp_rank ||
            (f.pp >= 0 && f.pp != cat_.pp_stage))
          continue;
        const TorchFile* tf = try_open(f);
        const Value* v = tf ? dict_get(&tf->root, rest) : nullptr;
        if (v && v->is_tensor() && v->as_tensor().shape == p.shape) {
          cat_.lp_locations[p.name] = {f.path, rest};
          break;
        }
      }
    }
  }
}

void CatalogBuilder::check_module_shapes() {
  if (cat_.wrapper == OptimizerWrapper::Zero3) return;  // ZeRO-3 modules hold placeholders
  // Pipelines keep weights in layer files (`module` is None); other jobs need the model file's module.
  if (!cat_.topology.pipeline && (!model_ || !dict_get(&model_->root, "module"))) return;
  std::vector<std::string> missing, wrong, wrong_frozen;
  std::map<std::string, std::vector<std::string>> absent_files;  // file that should hold them -> params
  std::map<std::string, const CheckpointFile*> by_path;
  for (const auto& c : cat_.files) by_path.emplace(c.path, &c);
  for (const auto& G : cat_.groups) {
    for (const auto& p : G.params) {
      const auto at = cat_.lp_locations.find(p.name);
      if (at == cat_.lp_locations.end()) {
        if (G.expert) continue;  // missing expert files are named by check_experts
        const std::string want = expected_entry_file(cat_, p.name);
        if (!want.empty())
          absent_files[want].push_back(p.name);
        else
          missing.push_back(p.name);
        continue;
      }
      const auto found = by_path.find(at->second.file);
      const CheckpointFile* f = found == by_path.end() ? nullptr : found->second;
      const TorchFile* tf = f ? try_open(*f) : nullptr;
      if (!tf) continue;  // unreadable: reported by try_open
      const Value* d = f->role == FileRole::Model ? dict_get(&tf->root, "module") : &tf->root;
      const Value* v = dict_get(d, at->second.key);
      if (!v || !v->is_tensor()) {
        missing.push_back(p.name);
      } else if (v->as_tensor().shape != p.shape) {
        wrong.push_back(p.name);
      }
    }
  }
  // Frozen params: the module must hold them at the shape frozen_param_shapes records (load_state_dict would
  // refuse another one).
  for (const auto& p : cat_.frozen_params) {
    const auto loc = locate_module_entry(cat_, p.name);
    if (!loc) continue;
    const TorchFile* tf = loc->file ? try_open(*loc->file) : nullptr;
    const Value* v = dict_get(entry_dict(tf, *loc), loc->key);
    if (v && v->is_tensor() && v->as_tensor().shape != p.shape) wrong_frozen.push_back(p.name);
  }
  for (const auto& [file, params] : absent_files) {
    problem(model::Code::LayerFileMissing,
            file + " is missing: the 16-bit weights of " + n(static_cast<int64_t>(params.size())) +
                " param(s) (" + short_list(params, 8) +
                ") are not in the checkpoint, so DeepSpeed cannot load it. Copy the file from the "
                "training job's storage if it survived there",
            file, {}, params);
  }
  if (!wrong_frozen.empty()) {
    problem(model::Code::ShapeMismatch,
            n(static_cast<int64_t>(wrong_frozen.size())) +
                " frozen module tensor(s) have a shape different from "
                "frozen_param_shapes",
            {}, {}, wrong_frozen);
  }
  if (!missing.empty()) {
    // A warning, not the table's error: params absent from the module contradict no shape that was saved
    // (the wrong shapes below are the error).
    problem(model::Code::ShapeMismatch, model::Severity::Warning,
            n(static_cast<int64_t>(missing.size())) +
                " trainable param(s) listed in param_shapes are not in the module "
                "state dict",
            {}, {}, missing);
  }
  if (!wrong.empty()) {
    problem(
        model::Code::ShapeMismatch,
        n(static_cast<int64_t>(wrong.size())) + " module tensor(s) have a shape different from param_shapes",
        {}, {}, wrong);
  }
}

}  // namespace ckptdoc::deepspeed
