// `ckptdoc inspect PATH`: a DeepSpeed checkpoint's catalog as text or JSON. Reads pickles and zip
// directories only.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ckptdoc/deepspeed/catalog_json.h"
#include "ckptdoc/deepspeed/checkpoint.h"
#include "ckptdoc/deepspeed/snapshot.h"
#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/registry.h"
#include "ckptdoc/weights/optimizer_file.h"
#include "ckptdoc/weights/weights_json.h"
#include "commands.h"
#include "format_helpers.h"
#include "keep_until_exit.h"

namespace ckptdoc::cli {
namespace {

using namespace ckptdoc::deepspeed;

void print_files_and_problems(const Catalog& c);

// A universal checkpoint: one folder of whole tensors per param instead of partitions.
void print_universal(const Catalog& c) {
  const auto& u = *c.universal;
  std::printf("DeepSpeed universal checkpoint %s\n", c.tag_dir.c_str());
  std::printf("  tag              %s\n", c.tag.c_str());
  std::printf("  made from        %s%s, ZeRO stage %d, %s, dp %d (loads at any dp)\n",
              std::string(wrapper_name(c.wrapper)).c_str(),
              c.optimizer_name_hint.empty() ? "" : (" wrapping " + c.optimizer_name_hint).c_str(),
              c.zero_stage, std::string(dtype_name(c.lp_dtype)).c_str(), u.source_dp_world_size);
  std::printf("  ds_version       %s\n", c.ds_version.empty() ? "(none)" : c.ds_version.c_str());
  std::printf("  steps            global %lld, iteration %s, optimizer step %s\n",
              static_cast<long long>(c.global_steps),
              u.iteration ? std::to_string(*u.iteration).c_str() : "-",
              c.optimizer_step ? std::to_string(*c.optimizer_step).c_str() : "-");
  std::printf(
      "  loaders          DeepSpeed 0.12.3-0.14.0 (step := iteration + 1, mpu required): %s; "
      "0.14.1+ (step.pt, param_groups): %s\n",
      u.loads_with_iteration() ? "yes" : "no (no iteration)", u.loads_with_step_files() ? "yes" : "no");
  std::printf("  universal_checkpoint_info  %s\n", u.has_universal_checkpoint_info ? "present" : "absent");
  std::printf("  params           %zu trainable (%s elements); %zu frozen; %zu buffers\n", c.groups.size(),
              grouped(c.trainable_numel()).c_str(), c.frozen_params.size(), c.buffer_names.size());
  std::printf("\nParams (zero/<param>/)\n");
  for (size_t k = 0; k < c.groups.size() && k < u.params.size(); ++k) {
    const auto& p = c.groups[k].params.front();
    std::string states;
    for (const auto& s : u.params[k].states) states += (states.empty() ? "" : " ") + s;
    std::printf("  %-40s %-14s group %d  %s%s\n", p.name.c_str(), shape_text(p.shape).c_str(),
                u.params[k].optimizer_group, states.empty() ? "(no folder)" : states.c_str(),
                u.params[k].step ? (" step " + std::to_string(*u.params[k].step)).c_str() : "");
  }
  print_files_and_problems(c);
}

std::string coordinates(const CheckpointFile& f, const Topology& t) {
  std::string s;
  auto add = [&s](const char* k, int v) {
    if (v >= 0) s += (s.empty() ? "" : " ") + std::string(k) + " " + std::to_string(v);
  };
  if (f.role == FileRole::Layer) add("layer", f.layer);
  if (f.role == FileRole::Expert) {
    add("moe layer", t.legacy_expert_files ? -1 : f.layer);
    add("expert", f.expert);
  }
  if (t.pp > 1) add("pp", f.pp);
  if (t.tp > 1) add("tp", f.tp);
  if (t.ep > 1) add("ep", f.ep);
  add("dp", f.dp_rank);
  if (f.role != FileRole::Layer || f.mp_rank >= 0) add("mp", f.mp_rank);
  return s;
}

void print_parallel(const Catalog& c) {
  const Topology& t = c.topology;
  if (t.model_parallel()) {
    std::printf("  parallel         pipeline %d x tensor %d x data %d (mp_world_size %d)%s\n", t.pp, t.tp,
                c.dp_world_size, t.mp_world_size, t.pipeline ? "; weights in pipeline layer files" : "");
  }
  for (const auto& L : t.moe_layers) {
    const int per = L.ep_size > 0 ? L.num_experts / L.ep_size : 0;
    std::printf(
        "  MoE layer %-6d %d experts (%s) over expert-parallel %d, %d per rank, expert-data-parallel %d\n",
        L.id, L.num_experts, L.prefix.c_str(), L.ep_size, per,
        L.ep_size > 0 ? c.dp_world_size / L.ep_size : 0);
  }
  if (c.autoep)
    for (const auto& L : c.autoep->layers) {
      std::string placed;
      for (size_t r = 0; r < L.experts_of_rank.size(); ++r)
        placed += (r ? ", " : "") + std::string("ep rank ") + std::to_string(r) + ": " +
                  expert_list_text(L.experts_of_rank[r]);
      std::printf(
          "  AutoEP layer %-3d %d experts (%s) over expert-parallel %d (%s), expert-data-parallel %d\n", L.id,
          L.num_experts, L.expert_prefix.c_str(), c.autoep->ep_size, placed.c_str(), c.autoep->edp_size);
    }
}

void print_groups(const Catalog& c, bool layout) {
  for (const auto& g : c.groups) {
    std::string what;
    if (g.expert)
      what = " (experts of ep rank " + std::to_string(g.ep_rank) + ", file group " +
             std::to_string(g.file_group) + ")";
    std::printf("  #%d%s  %s elements in %zu params, padded to %s, %s per rank\n", g.index, what.c_str(),
                grouped(g.numel).c_str(), g.params.size(), grouped(g.padded_numel).c_str(),
                grouped(g.partition_numel).c_str());
    for (const auto& p : g.params) {
      const auto it = c.lp_locations.find(p.name);
      std::printf("      %-40s %-14s offset %-10s %s\n", p.name.c_str(), shape_text(p.shape).c_str(),
                  grouped(p.offset).c_str(),
                  it == c.lp_locations.end() ? "(no 16-bit weight)" : it->second.file.c_str());
    }
    for (const auto& rp : g.partitions) {
      std::printf("      dp rank %d: saved %s, padding %s", rp.rank, grouped(rp.saved_numel).c_str(),
                  grouped(rp.padding).c_str());
      if (layout) {
        for (const auto& f : rp.fragments) {
          std::printf("\n        %s[%lld:%lld] at %lld", g.params[static_cast<size_t>(f.param)].name.c_str(),
                      static_cast<long long>(f.param_offset),
                      static_cast<long long>(f.param_offset) + static_cast<long long>(f.numel),
                      static_cast<long long>(f.partition_offset));
        }
      }
      std::printf("\n");
    }
  }
}

void print_text(const Checkpoint& ck, bool layout) {
  const Catalog& c = ck.catalog();
  if (c.universal) return print_universal(c);
  std::printf("DeepSpeed checkpoint %s\n", c.tag_dir.c_str());
  std::printf("  tag              %s\n", c.tag.c_str());
  std::printf("  ZeRO stage       %d\n", c.zero_stage);
  if (c.wrapper == OptimizerWrapper::None)  // nothing saved; ds_config may still say what the run used
    std::printf(
        "  optimizer        none saved%s\n",
        c.optimizer_name_hint.empty() ? "" : (" (ds_config names " + c.optimizer_name_hint + ")").c_str());
  else
    std::printf("  optimizer        %s%s\n", std::string(wrapper_name(c.wrapper)).c_str(),
                c.optimizer_name_hint.empty() ? "" : (" wrapping " + c.optimizer_name_hint).c_str());
  std::printf("  lp dtype         %s\n", std::string(dtype_name(c.lp_dtype)).c_str());
  std::string pc;
  for (int x : c.partition_count) pc += (pc.empty() ? "" : ",") + std::to_string(x);
  std::printf("  world sizes      dp %d, mp %d (partition_count %s, %d optimizer files)\n", c.dp_world_size,
              c.mp_world_size, pc.empty() ? "-" : pc.c_str(), c.optim_file_count);
  print_parallel(c);
  std::printf("  ds_version       %s\n", c.ds_version.empty() ? "(none)" : c.ds_version.c_str());
  std::printf("  steps            global %lld, skipped %lld, samples %lld, optimizer step %s\n",
              static_cast<long long>(c.global_steps), static_cast<long long>(c.skipped_steps),
              static_cast<long long>(c.global_samples),
              c.optimizer_step ? std::to_string(*c.optimizer_step).c_str() : "-");
  if (c.loss_scaler.present) {
    std::printf("  loss scaler      %s, scale %g, min %g, iter %lld, last overflow %lld\n",
                c.loss_scaler.dynamic ? "dynamic" : "static", c.loss_scaler.cur_scale,
                c.loss_scaler.min_scale, static_cast<long long>(c.loss_scaler.cur_iter),
                static_cast<long long>(c.loss_scaler.last_overflow_iter));
  }
  size_t nparams = 0;
  int64_t numel = 0;
  std::vector<std::shared_ptr<const Checkpoint>> slices;
  for (int m = 0; m < ck.slice_count(); ++m) {
    try {
      slices.push_back(ck.slice(m));
    } catch (const std::exception&) {
      continue;  // its problems are listed below
    }
    for (const auto& g : slices.back()->catalog().groups) nparams += g.params.size();
    numel += slices.back()->catalog().trainable_numel();
  }
  if (c.groups.empty() && !c.module_keys.empty() && slices.size() <= 1) {
    // No optimizer state, so nothing lists the trainable params: say what the module holds instead of "0".
    size_t tensors = 0;
    int64_t elements = 0;
    for (const auto& k : c.module_keys)
      if (const auto t = ck.module_tensor(k)) ++tensors, elements += t->numel();
    std::printf(
        "  params           not listed (no optimizer state); the module holds %zu tensors (%s elements); "
        "%zu buffers\n",
        tensors, grouped(elements).c_str(), c.buffer_names.size());
  } else {
    std::printf(
        "  params           %zu trainable (%s elements) in %zu groups%s; %zu frozen; %zu buffers; %zu "
        "shared\n",
        nparams, grouped(numel).c_str(), c.groups.size(),
        slices.size() > 1 ? (" per model-parallel rank, " + std::to_string(slices.size()) + " ranks").c_str()
                          : "",
        c.frozen_params.size(), c.buffer_names.size(), c.shared_params.size());
  }
  if (!c.optimizer_state_keys.empty()) {
    std::string k;
    for (const auto& s : c.optimizer_state_keys) k += (k.empty() ? "" : ", ") + s;
    std::printf("  optimizer state  %s\n", k.c_str());
  }
  std::printf("\nGroups\n");
  for (const auto& sl : slices) {
    const Catalog& sc = sl->catalog();
    if (slices.size() > 1)
      std::printf(" model-parallel rank %d (%s)\n", sc.mp_rank, sc.slice_label().c_str());
    print_groups(sc, layout);
  }
  print_files_and_problems(c);
}

void print_files_and_problems(const Catalog& c) {
  std::printf("\nFiles\n");
  for (const auto& f : c.files) {
    std::printf("  %-50s %-12s %-28s %s\n", f.path.c_str(), std::string(role_name(f.role)).c_str(),
                coordinates(f, c.topology).c_str(), human_bytes(f.bytes).c_str());
  }
  std::printf("\nProblems\n");
  if (c.problems.empty()) std::printf("  none\n");
  for (const auto& p : c.problems) {
    std::printf("  %-7s %-22s %s\n", std::string(model::severity_name(p.severity)).c_str(), p.code.c_str(),
                p.message.c_str());
  }
}

// A Hugging Face folder or weights file: index, files, tensors, problems.
// Accelerate's save_state and a plain Trainer's checkpoint keep the optimizer beside the weights
// (optimizer.bin, optimizer.pt): its params, steps and keys.
void print_optimizer_files(const std::string& dir) {
  for (const auto& f : nlohmann::json::parse(weights::optimizer_files_json(dir))) {
    const std::string file = f["file"].get<std::string>();
    if (f.contains("error")) {
      std::printf("\nOptimizer state %s\n  UNREADABLE: %s\n", file.c_str(),
                  f["error"].get<std::string>().c_str());
      continue;
    }
    std::string keys, steps;
    for (const auto& k : f["keys"]) keys += (keys.empty() ? "" : ", ") + k.get<std::string>();
    for (const auto& s : f["steps"]) steps += (steps.empty() ? "" : ", ") + std::to_string(s.get<int64_t>());
    std::printf("\nOptimizer state %s (torch.save of an optimizer state dict; params %s)\n", file.c_str(),
                !f["params"].empty() && f["params"][0]["param"].is_string() ? "by name"
                                                                            : "by index, group after group");
    std::printf("  param groups     %zu, %zu params, %zu with state\n", f["param_groups"].get<size_t>(),
                f["params_in_groups"].get<size_t>(), f["params_with_state"].get<size_t>());
    std::printf("  step             %s\n", steps.empty() ? "(none)" : steps.c_str());
    std::printf("  keys             %s\n", keys.empty() ? "(none)" : keys.c_str());
    for (const auto& p : f["params"]) {
      std::string tensors;
      for (const auto& [k, t] : p["tensors"].items())
        tensors += (tensors.empty() ? "" : "  ") + k + " " + t["dtype"].get<std::string>() + " " +
                   shape_text(t["shape"].get<std::vector<int64_t>>());
      const auto& param = p["param"];
      const std::string label =
          "state[" + (param.is_string() ? param.get<std::string>() : std::to_string(param.get<int64_t>())) +
          "]";
      std::printf("  %-28s %s\n", label.c_str(), tensors.c_str());
    }
  }
}

void print_weights(const weights::WeightsSource& w, const char* title) {
  std::printf("%s %s\n", title, w.path().c_str());
  uint64_t numel = 0, bytes = 0;
  for (const auto& t : w.tensors()) {
    numel += static_cast<uint64_t>(t.tensor.numel());
    bytes += t.tensor.nbytes();
  }
  std::printf("  tensors          %zu (%s elements, %s), mostly %s\n", w.tensors().size(),
              grouped(static_cast<int64_t>(numel)).c_str(), human_bytes(bytes).c_str(),
              std::string(dtype_name(w.main_dtype())).c_str());
  if (w.index()) {
    std::printf("  index            %s: %zu tensors, total_size %s\n", w.index()->path.c_str(),
                w.index()->weight_map.size(),
                w.index()->total_size ? std::to_string(*w.index()->total_size).c_str() : "(none)");
  }
  std::string config;
  for (const auto& [k, v] : w.config_sizes())
    config += (config.empty() ? "" : ", ") + k + " " + std::to_string(v);
  if (!config.empty()) std::printf("  config.json      %s\n", config.c_str());
  std::printf("\nFiles\n");
  for (const auto& f : w.files())
    std::printf("  %-50s %-11s %5zu tensors %s%s\n", f.path.c_str(),
                f.format.empty() ? "?" : f.format.c_str(), f.tensors.size(), human_bytes(f.bytes).c_str(),
                f.readable ? "" : "  UNREADABLE");
  std::printf("\nTensors\n");
  for (size_t i = 0; i < w.tensors().size(); ++i) {
    const auto& t = w.tensors()[i];
    std::printf("  %-50s %-9s %-20s %s\n", t.name.c_str(), std::string(dtype_name(t.tensor.dtype)).c_str(),
                shape_text(t.tensor.shape).c_str(), w.file_of(i).c_str());
  }
  if (w.is_folder()) print_optimizer_files(w.root());
  std::printf("\nProblems\n");
  if (w.problems().empty()) std::printf("  none\n");
  for (const auto& p : w.problems())
    std::printf("  %-7s %-22s %s\n", std::string(model::severity_name(p.severity)).c_str(), p.code.c_str(),
                p.message.c_str());
}

}  // namespace

int run_inspect(const InspectOptions& o) {
  if (const auto source = sources::find_source(o.path); !source->reads_into_catalog())
    return run_source_inspect(*source, o);
  OpenOptions options;
  options.tag = o.tag;
  const auto ckpt = Checkpoint::open(o.path, options);
  keep_until_exit(ckpt);  // freed by the exit, not value by value
  const auto& weights = ckpt->weights();
  if (o.json) {
    if (ckpt->weights_only() && weights) {
      auto j = nlohmann::json::parse(weights::weights_to_json(*weights));
      if (weights->is_folder())
        if (auto o = nlohmann::json::parse(weights::optimizer_files_json(weights->root())); !o.empty())
          j["optimizer_files"] = std::move(o);
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    auto j = nlohmann::json::parse(checkpoint_to_json(*ckpt));
    if (weights) j["trainer_weights"] = nlohmann::json::parse(weights::weights_to_json(*weights));
    std::printf("%s\n", j.dump(2).c_str());
  } else if (ckpt->weights_only() && weights) {
    print_weights(*weights, ckpt->catalog().single_file ? "Weights file" : "Hugging Face model folder");
  } else {
    print_text(*ckpt, o.layout);
    if (weights) {
      std::printf("\n");
      print_weights(*weights, "Model weights beside the checkpoint (Trainer checkpoint folder):");
    }
    if (const auto* snap = ckpt->snapshot()) {  // a live-engine snapshot (ckptdoc_hook)
      const auto& m = snap->manifest();
      std::printf(
          "\nLive-engine snapshot (ckptdoc_hook): %d rank files, %s gradients recorded; DeepSpeed %s, torch "
          "%s\n",
          m.world_size, m.live.has_grads ? "with" : "no", m.ds_version.c_str(), m.torch_version.c_str());
    }
  }
  return 0;
}

}  // namespace ckptdoc::cli
