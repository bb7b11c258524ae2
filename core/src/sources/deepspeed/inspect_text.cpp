// `inspect`'s text for a DeepSpeed checkpoint (inspect_text.h): its catalog, DeepSpeed's own fields included
// (ZeRO stage, wrapper, files and roles, loss scaler, universal and AutoEP layouts). Moved from the CLI's
// inspect command (#27), which printed the same lines.
#include "ckptdoc/sources/deepspeed/inspect_text.h"

#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/appendf.h"
#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/human_bytes.h"
#include "ckptdoc/model/finding_codes.h"

namespace ckptdoc::deepspeed {
namespace {

void print_files_and_problems(std::string& out, const Catalog& c);

// A universal checkpoint: one folder of whole tensors per param instead of partitions.
void print_universal(std::string& out, const Catalog& c) {
  const auto& u = *c.universal;
  appendf(out, "DeepSpeed universal checkpoint %s\n", c.tag_dir.c_str());
  appendf(out, "  tag              %s\n", c.tag.c_str());
  appendf(out, "  made from        %s%s, ZeRO stage %d, %s, dp %d (loads at any dp)\n",
          std::string(wrapper_name(c.wrapper)).c_str(),
          c.optimizer_name_hint.empty() ? "" : (" wrapping " + c.optimizer_name_hint).c_str(), c.zero_stage,
          std::string(dtype_name(c.lp_dtype)).c_str(), u.source_dp_world_size);
  appendf(out, "  ds_version       %s\n", c.ds_version.empty() ? "(none)" : c.ds_version.c_str());
  appendf(out, "  steps            global %lld, iteration %s, optimizer step %s\n",
          static_cast<long long>(c.global_steps), u.iteration ? std::to_string(*u.iteration).c_str() : "-",
          c.optimizer_step ? std::to_string(*c.optimizer_step).c_str() : "-");
  appendf(out,
          "  loaders          DeepSpeed 0.12.3-0.14.0 (step := iteration + 1, mpu required): %s; "
          "0.14.1+ (step.pt, param_groups): %s\n",
          u.loads_with_iteration() ? "yes" : "no (no iteration)", u.loads_with_step_files() ? "yes" : "no");
  appendf(out, "  universal_checkpoint_info  %s\n", u.has_universal_checkpoint_info ? "present" : "absent");
  appendf(out, "  params           %zu trainable (%s elements); %zu frozen; %zu buffers\n", c.groups.size(),
          grouped(c.trainable_numel()).c_str(), c.frozen_params.size(), c.buffer_names.size());
  appendf(out, "\nParams (zero/<param>/)\n");
  for (size_t k = 0; k < c.groups.size() && k < u.params.size(); ++k) {
    const auto& p = c.groups[k].params.front();
    std::string states;
    for (const auto& s : u.params[k].states) states += (states.empty() ? "" : " ") + s;
    appendf(out, "  %-40s %-14s group %d  %s%s\n", p.name.c_str(), shape_text(p.shape).c_str(),
            u.params[k].optimizer_group, states.empty() ? "(no folder)" : states.c_str(),
            u.params[k].step ? (" step " + std::to_string(*u.params[k].step)).c_str() : "");
  }
  print_files_and_problems(out, c);
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

void print_parallel(std::string& out, const Catalog& c) {
  const Topology& t = c.topology;
  if (t.model_parallel()) {
    appendf(out, "  parallel         pipeline %d x tensor %d x data %d (mp_world_size %d)%s\n", t.pp, t.tp,
            c.dp_world_size, t.mp_world_size, t.pipeline ? "; weights in pipeline layer files" : "");
  }
  for (const auto& L : t.moe_layers) {
    const int per = L.ep_size > 0 ? L.num_experts / L.ep_size : 0;
    appendf(
        out,
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
      appendf(out,
              "  AutoEP layer %-3d %d experts (%s) over expert-parallel %d (%s), expert-data-parallel %d\n",
              L.id, L.num_experts, L.expert_prefix.c_str(), c.autoep->ep_size, placed.c_str(),
              c.autoep->edp_size);
    }
}

void print_groups(std::string& out, const Catalog& c, bool layout) {
  for (const auto& g : c.groups) {
    std::string what;
    if (g.expert)
      what = " (experts of ep rank " + std::to_string(g.ep_rank) + ", file group " +
             std::to_string(g.file_group) + ")";
    appendf(out, "  #%d%s  %s elements in %zu params, padded to %s, %s per rank\n", g.index, what.c_str(),
            grouped(g.numel).c_str(), g.params.size(), grouped(g.padded_numel).c_str(),
            grouped(g.partition_numel).c_str());
    for (const auto& p : g.params) {
      const auto it = c.lp_locations.find(p.name);
      appendf(out, "      %-40s %-14s offset %-10s %s\n", p.name.c_str(), shape_text(p.shape).c_str(),
              grouped(p.offset).c_str(),
              it == c.lp_locations.end() ? "(no 16-bit weight)" : it->second.file.c_str());
    }
    for (const auto& rp : g.partitions) {
      appendf(out, "      dp rank %d: saved %s, padding %s", rp.rank, grouped(rp.saved_numel).c_str(),
              grouped(rp.padding).c_str());
      if (layout) {
        for (const auto& f : rp.fragments) {
          appendf(out, "\n        %s[%lld:%lld] at %lld", g.params[static_cast<size_t>(f.param)].name.c_str(),
                  static_cast<long long>(f.param_offset),
                  static_cast<long long>(f.param_offset) + static_cast<long long>(f.numel),
                  static_cast<long long>(f.partition_offset));
        }
      }
      appendf(out, "\n");
    }
  }
}

void print_text(std::string& out, const Checkpoint& ck, bool layout) {
  const Catalog& c = ck.catalog();
  if (c.universal) return print_universal(out, c);
  appendf(out, "DeepSpeed checkpoint %s\n", c.tag_dir.c_str());
  appendf(out, "  tag              %s\n", c.tag.c_str());
  appendf(out, "  ZeRO stage       %d\n", c.zero_stage);
  if (c.wrapper == OptimizerWrapper::None)  // nothing saved; ds_config may still say what the run used
    appendf(
        out, "  optimizer        none saved%s\n",
        c.optimizer_name_hint.empty() ? "" : (" (ds_config names " + c.optimizer_name_hint + ")").c_str());
  else
    appendf(out, "  optimizer        %s%s\n", std::string(wrapper_name(c.wrapper)).c_str(),
            c.optimizer_name_hint.empty() ? "" : (" wrapping " + c.optimizer_name_hint).c_str());
  appendf(out, "  lp dtype         %s\n", std::string(dtype_name(c.lp_dtype)).c_str());
  std::string pc;
  for (int x : c.partition_count) pc += (pc.empty() ? "" : ",") + std::to_string(x);
  appendf(out, "  world sizes      dp %d, mp %d (partition_count %s, %d optimizer files)\n", c.dp_world_size,
          c.mp_world_size, pc.empty() ? "-" : pc.c_str(), c.optim_file_count);
  print_parallel(out, c);
  appendf(out, "  ds_version       %s\n", c.ds_version.empty() ? "(none)" : c.ds_version.c_str());
  appendf(out, "  steps            global %lld, skipped %lld, samples %lld, optimizer step %s\n",
          static_cast<long long>(c.global_steps), static_cast<long long>(c.skipped_steps),
          static_cast<long long>(c.global_samples),
          c.optimizer_step ? std::to_string(*c.optimizer_step).c_str() : "-");
  if (c.loss_scaler.present) {
    appendf(out, "  loss scaler      %s, scale %g, min %g, iter %lld, last overflow %lld\n",
            c.loss_scaler.dynamic ? "dynamic" : "static", c.loss_scaler.cur_scale, c.loss_scaler.min_scale,
            static_cast<long long>(c.loss_scaler.cur_iter),
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
    appendf(out,
            "  params           not listed (no optimizer state); the module holds %zu tensors (%s elements); "
            "%zu buffers\n",
            tensors, grouped(elements).c_str(), c.buffer_names.size());
  } else {
    appendf(out,
            "  params           %zu trainable (%s elements) in %zu groups%s; %zu frozen; %zu buffers; %zu "
            "shared\n",
            nparams, grouped(numel).c_str(), c.groups.size(),
            slices.size() > 1
                ? (" per model-parallel rank, " + std::to_string(slices.size()) + " ranks").c_str()
                : "",
            c.frozen_params.size(), c.buffer_names.size(), c.shared_params.size());
  }
  if (!c.optimizer_state_keys.empty()) {
    std::string k;
    for (const auto& s : c.optimizer_state_keys) k += (k.empty() ? "" : ", ") + s;
    appendf(out, "  optimizer state  %s\n", k.c_str());
  }
  appendf(out, "\nGroups\n");
  for (const auto& sl : slices) {
    const Catalog& sc = sl->catalog();
    if (slices.size() > 1)
      appendf(out, " model-parallel rank %d (%s)\n", sc.mp_rank, sc.slice_label().c_str());
    print_groups(out, sc, layout);
  }
  print_files_and_problems(out, c);
}

void print_files_and_problems(std::string& out, const Catalog& c) {
  appendf(out, "\nFiles\n");
  for (const auto& f : c.files) {
    appendf(out, "  %-50s %-12s %-28s %s\n", f.path.c_str(), std::string(role_name(f.role)).c_str(),
            coordinates(f, c.topology).c_str(), human_bytes(f.bytes).c_str());
  }
  appendf(out, "\nProblems\n");
  if (c.problems.empty()) appendf(out, "  none\n");
  for (const auto& p : c.problems) {
    appendf(out, "  %-7s %-22s %s\n", std::string(model::severity_name(p.severity)).c_str(), p.code.c_str(),
            p.message.c_str());
  }
}

}  // namespace

std::string summary_text(const Catalog& c) {
  std::string s = c.universal ? "universal checkpoint of a " : "";
  s += c.wrapper == OptimizerWrapper::BF16Optimizer ? "BF16_Optimizer"
                                                    : "ZeRO-" + std::to_string(c.zero_stage);
  s += std::string(", ") + (c.lp_dtype == DType::BF16 ? "bf16" : c.lp_dtype == DType::F16 ? "fp16" : "fp32");
  const int dp = c.universal ? c.universal->source_dp_world_size : c.dp_world_size;
  s += (c.universal ? " run saved at dp " : ", dp ") + std::to_string(dp);
  if (!c.ds_version.empty()) s += ", DeepSpeed " + c.ds_version;
  return s;
}

std::string inspect_text(const Checkpoint& ck, bool layout) {
  std::string out;
  print_text(out, ck, layout);
  return out;
}

}  // namespace ckptdoc::deepspeed
