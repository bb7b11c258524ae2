#include "sources/deepspeed/catalog_job.h"

#include <map>
#include <set>

#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/number_text.h"
#include "ckptdoc/short_list.h"

namespace ckptdoc::deepspeed {

namespace {

std::string n(int64_t x) {
  return std::to_string(x);
}

struct ParamView {
  std::vector<int64_t> shape;
  std::optional<DType> dtype;  // of its 16-bit weight, from the pickle (no tensor bytes are read)
};

std::map<std::string, ParamView> params_of(const Checkpoint& s) {
  std::map<std::string, ParamView> out;
  for (const auto& g : s.catalog().groups)
    for (const auto& p : g.params) {
      ParamView v{p.shape, std::nullopt};
      if (auto t = s.lp_param(p.name)) v.dtype = t->dtype;
      out[p.name] = std::move(v);
    }
  return out;
}

}  // namespace

void add_job_problems(const std::vector<std::shared_ptr<const Checkpoint>>& slices,
                      std::vector<Problem>& out) {
  if (slices.empty()) return;
  const Catalog& c0 = slices.front()->catalog();
  const Topology& t = c0.topology;

  // The ranks must agree on how they were trained (a rank without its model file is named already).
  for (const auto& s : slices) {
    const Catalog& c = s->catalog();
    if (!c.metadata_model_file()) continue;
    std::string why;
    if (c.wrapper != c0.wrapper)
      why = "its optimizer is " + std::string(wrapper_name(c.wrapper)) + ", mp rank 0's " +
            std::string(wrapper_name(c0.wrapper));
    else if (c.lp_dtype != c0.lp_dtype)
      why = "its weights are " + std::string(dtype_name(c.lp_dtype)) + ", mp rank 0's " +
            std::string(dtype_name(c0.lp_dtype));
    else if (c.dp_world_size != c0.dp_world_size)
      why = "its dp_world_size is " + n(c.dp_world_size) + ", mp rank 0's " + n(c0.dp_world_size);
    if (!why.empty()) {
      Problem& p = out.emplace_back(
          c.lp_dtype != c0.lp_dtype && c.wrapper == c0.wrapper ? model::Code::TpDtypeMismatch
                                                               : model::Code::TopologyMismatch,
          c.slice_label() + ": " + why + "; all model-parallel ranks of one job train alike");
      p.pp = c.pp_stage;
      p.tp = c.tp_rank;
    }
  }

  // Tensor ranks of one stage: the same params with the same shapes and dtypes.
  if (t.tp > 1) {
    std::map<int, std::vector<const Checkpoint*>> stages;
    for (const auto& s : slices)
      if (s->catalog().metadata_model_file()) stages[s->catalog().pp_stage].push_back(s.get());
    for (const auto& [stage, members] : stages) {
      std::map<int, std::map<std::string, ParamView>> by_tp;
      for (const auto* s : members) by_tp[s->catalog().tp_rank] = params_of(*s);
      if (by_tp.size() < 2) continue;
      const auto& [tp0, ref] = *by_tp.begin();
      std::vector<std::string> shapes, dtypes, params_shape, params_dtype;
      std::set<int> ranks_shape, ranks_dtype;
      for (const auto& [tp, mine] : by_tp) {
        if (tp == tp0) continue;
        for (const auto& [name, v] : ref) {
          auto it = mine.find(name);
          if (it == mine.end()) {
            shapes.push_back(name + " is on tp " + n(tp0) + " but not on tp " + n(tp));
          } else if (it->second.shape != v.shape) {
            shapes.push_back(name + " is " + shape_text(v.shape) + " on tp " + n(tp0) + " but " +
                             shape_text(it->second.shape) + " on tp " + n(tp));
          } else if (v.dtype && it->second.dtype && *v.dtype != *it->second.dtype) {
            dtypes.push_back(name + " is " + std::string(dtype_name(*v.dtype)) + " on tp " + n(tp0) +
                             " but " + std::string(dtype_name(*it->second.dtype)) + " on tp " + n(tp));
            params_dtype.push_back(name);
            ranks_dtype.insert(tp);
            continue;
          } else {
            continue;
          }
          params_shape.push_back(name);
          ranks_shape.insert(tp);
        }
        for (const auto& [name, v] : mine)
          if (!ref.count(name)) {
            shapes.push_back(name + " is on tp " + n(tp) + " but not on tp " + n(tp0));
            params_shape.push_back(name);
            ranks_shape.insert(tp);
          }
      }
      const std::string where = t.pp > 1 ? "pipeline stage " + n(stage) + ": " : "";
      if (!shapes.empty())
        out.emplace_back(
               model::Code::TpShapeMismatch,
               where + "the tensor-parallel slices of " + n(static_cast<int64_t>(params_shape.size())) +
                   " param(s) do not fit together: " + short_list(shapes, 6, "; ") +
                   ". Megatron-style tensor parallelism splits a param into equal slices on every rank; "
                   "these files come from different runs or a damaged save",
               "", std::vector<int>(ranks_shape.begin(), ranks_shape.end()), params_shape)
            .pp = t.pp > 1 ? stage : -1;
      if (!dtypes.empty())
        out.emplace_back(model::Code::TpDtypeMismatch,
                         where + "tensor-parallel slices of one param have different dtypes: " +
                             short_list(dtypes, 6, "; "),
                         "", std::vector<int>(ranks_dtype.begin(), ranks_dtype.end()), params_dtype)
            .pp = t.pp > 1 ? stage : -1;
    }
  }

  // Pipeline layers with a file for some tensor ranks only (layers without trainable params included).
  if (t.pipeline && t.tp > 1) {
    std::map<int, std::set<int>> tps;  // layer -> tensor ranks with a file
    for (const auto& f : c0.files)
      if (f.role == FileRole::Layer) tps[f.layer].insert(std::max(f.tp, 0));
    for (const auto& [layer, have] : tps)
      for (int tp = 0; tp < t.tp; ++tp)
        if (!have.count(tp)) {
          const std::string name =
              "layer_" + two_digits(layer) + "-model_" + two_digits(tp) + "-model_states.pt";
          const auto st = t.layer_stage.find(layer);
          // Layers with params are named by their own mp rank's check (catalog_lp.cpp); here the others.
          if (st != t.layer_stage.end()) continue;
          out.emplace_back(model::Code::LayerFileMissing,
                           name + " is missing while the other tensor ranks have layer " + n(layer) +
                               "'s file: DeepSpeed's load_checkpoint of that tensor rank fails",
                           name)
              .tp = tp;
        }
  }
}

}  // namespace ckptdoc::deepspeed
