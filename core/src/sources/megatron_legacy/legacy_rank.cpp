// model_optim_rng.pt read inertly (legacy_rank.h). What megatron-core 0.18.0 saves there:
// megatron/training/checkpointing.py generate_state_dict (args, checkpoint_version, iteration, model,
// optimizer, rng_state, ...) and optimizer/optimizer.py Float16OptimizerWithFloat16Params.state_dict
// ({optimizer, fp32_from_fp16_params, grad_scaler}).
#include "legacy_rank.h"

#include "ckptdoc/format/known_objects.h"

namespace ckptdoc::megatron_legacy {
namespace {

const Value* arg(const Value& args, std::string_view name) {
  const Value* attrs = namespace_attrs(args);
  return attrs ? attrs->get(name) : nullptr;
}

int int_arg(const Value& args, std::string_view name, int fallback) {
  const Value* v = arg(args, name);
  return v && (v->is(Value::Kind::Int) || v->is(Value::Kind::Bool)) ? static_cast<int>(v->as_int())
                                                                    : fallback;
}

bool bool_arg(const Value& args, std::string_view name) {
  const Value* v = arg(args, name);
  return v && v->is(Value::Kind::Bool) && v->as_bool();
}

std::optional<double> number(const Value* v) {
  if (v && (v->is(Value::Kind::Float) || v->is(Value::Kind::Int))) return v->as_float();
  return std::nullopt;
}

void read_args(RankContent& r, const Value& args) {
  r.args_type = args.type_name();
  if (const Value* attrs = namespace_attrs(args); attrs && attrs->is_dict())
    r.args_fields = attrs->as_dict().items.size();
  r.tp_size = int_arg(args, "tensor_model_parallel_size", 1);
  r.pp_size = int_arg(args, "pipeline_model_parallel_size", 1);
  r.ep_size = int_arg(args, "expert_model_parallel_size", 1);
  r.vpp_size = int_arg(args, "virtual_pipeline_model_parallel_size", 0);
  r.num_layers = int_arg(args, "num_layers", 0);
  r.use_distributed_optimizer = bool_arg(args, "use_distributed_optimizer");
  r.swiglu = bool_arg(args, "swiglu");
}

void read_optimizer(RankContent& r, const Value& opt) {
  r.has_optimizer = true;
  const Value* inner = opt.get("optimizer");
  const Value* mains = opt.get("fp32_from_fp16_params");
  if (inner && inner->is_dict()) {
    if (const Value* groups = inner->get("param_groups"); groups && groups->is_sequence())
      for (const auto& g : groups->items()) {
        ParamGroup pg;
        if (const Value* p = g.get("params"); p && p->is_sequence()) {
          pg.params = p->items().size();
          for (const auto& id : p->items()) pg.ids.push_back(id.is(Value::Kind::Int) ? id.as_int() : -1);
        }
        pg.wd_mult = number(g.get("wd_mult"));
        pg.lr_mult = number(g.get("lr_mult"));
        if (const Value* v = g.get("is_expert_parallel"); v && v->is(Value::Kind::Bool))
          pg.is_expert_parallel = v->as_bool();
        if (const Value* v = g.get("is_decoupled_lr"); v && v->is(Value::Kind::Bool))
          pg.is_decoupled_lr = v->as_bool();
        r.groups.push_back(pg);
      }
    if (const Value* state = inner->get("state"); state && state->is_dict())
      for (const auto& [k, v] : state->as_dict().items) {
        if (!v.is_dict()) continue;
        const std::string index = k.is(Value::Kind::Int) ? std::to_string(k.as_int()) : k.repr(20);
        for (const auto& [field, t] : v.as_dict().items)
          if (t.is_tensor() && field.is(Value::Kind::Str))
            r.optimizer_tensors.push_back({"state." + index + "." + field.as_str(),
                                           k.is(Value::Kind::Int) ? k.as_int() : -1, t.as_tensor()});
      }
  }
  if (!mains) {
    r.optimizer_layout =
        r.use_distributed_optimizer
            ? "the distributed optimizer keeps its fp32 mains in distrib_optim.pt, which is absent"
            : "optimizer holds no fp32_from_fp16_params (not Float16OptimizerWithFloat16Params)";
    return;
  }
  if (!mains->is_sequence()) {
    r.optimizer_layout =
        "optimizer.fp32_from_fp16_params is a " + mains->type_name() + ", not a list of groups";
    return;
  }
  for (const auto& group : mains->items()) {
    std::vector<Tensor> g;
    if (!group.is_sequence()) {
      r.optimizer_layout =
          "an optimizer.fp32_from_fp16_params group is a " + group.type_name() + ", not a list";
      r.mains.clear();
      return;
    }
    for (const auto& t : group.items()) {
      if (!t.is_tensor()) {
        r.optimizer_layout =
            "an optimizer.fp32_from_fp16_params entry is a " + t.type_name() + ", not a tensor";
        r.mains.clear();
        return;
      }
      g.push_back(t.as_tensor());
    }
    r.mains.push_back(std::move(g));
  }
}

}  // namespace

RankContent read_rank(const std::string& path, const std::string& shown) {
  RankContent r;
  r.hazards = pickle_hazards_of_file(path, shown);
  try {
    auto tf = std::make_shared<TorchFile>(TorchFile::open(path));
    const Value& root = tf->root;
    if (!root.is_dict())
      throw Error(ErrorKind::Unsupported, path, "", "its root is a " + root.type_name() + ", not a dict");
    for (const auto& [k, v] : root.as_dict().items) {
      const std::string key = k.is(Value::Kind::Str) ? k.as_str() : k.repr(40);
      r.keys.push_back(key);
      if (key == "iteration" && v.is(Value::Kind::Int)) r.iteration = v.as_int();
      if (key == "checkpoint_version") r.checkpoint_version = number(&v);
      if (key == "args" && v.is(Value::Kind::Object)) read_args(r, v);
    }
    if (const Value* model = root.get("model"); model && model->is_dict()) {
      r.model_key = "model";
      for (const auto& [k, v] : model->as_dict().items) {
        // Transformer Engine keeps each module's FP8 metadata as "<module>._extra_state" (a uint8 tensor in
        // TE 1.x, None without TE): module state, not a param, so not a weight and not in the optimizer's
        // groups
        const bool extra = k.is(Value::Kind::Str) && k.as_str().size() >= 13 &&
                           k.as_str().compare(k.as_str().size() - 13, 13, "._extra_state") == 0;
        if (k.is(Value::Kind::Str) && v.is_tensor() && !extra)
          r.model.push_back({k.as_str(), v.as_tensor()});
        else
          ++r.model_non_tensors;
      }
    } else if (root.get("model0")) {
      r.model_key = "model0";  // a virtual pipeline: one model<i> per chunk, not read yet
    }
    if (const Value* opt = root.get("optimizer"); opt && opt->is_dict()) read_optimizer(r, *opt);
    r.file = std::move(tf);
  } catch (const Error& e) {
    r.error = e.what();
    r.error_kind = e.kind();
  } catch (const std::exception& e) {
    r.error = shown + ": " + e.what();
  }
  return r;
}

}  // namespace ckptdoc::megatron_legacy
