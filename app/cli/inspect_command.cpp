// `ckptdoc inspect PATH`: a DeepSpeed checkpoint's catalog as text or JSON. Reads pickles and zip
// directories only.
#include <cstdio>
#include <string>

#include "ckptdoc/deepspeed/catalog_json.h"
#include "ckptdoc/deepspeed/checkpoint.h"
#include "ckptdoc/snapshot/snapshot.h"
#include "commands.h"
#include "format_helpers.h"

namespace ckptdoc::cli {
namespace {

using namespace ckptdoc::deepspeed;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void print_text(const Catalog& c, bool layout) {
  std::printf("DeepSpeed checkpoint %s\n", c.tag_dir.c_str());
  std::printf("  tag              %s\n", c.tag.c_str());
  std::printf("  ZeRO stage       %d\n", c.zero_stage);
  std::printf("  optimizer        %s%s\n", std::string(wrapper_name(c.wrapper)).c_str(),
              c.optimizer_name_hint.empty() ? "" : (" wrapping " + c.optimizer_name_hint).c_str());
  std::printf("  lp dtype         %s\n", std::string(dtype_name(c.lp_dtype)).c_str());
  std::string pc;
  for (int x : c.partition_count) pc += (pc.empty() ? "" : ",") + std::to_string(x);
  std::printf("  world sizes      dp %d, mp %d (partition_count %s, %d optimizer files)\n", c.dp_world_size,
              c.mp_world_size, pc.empty() ? "-" : pc.c_str(), c.optim_file_count);
  std::printf("  ds_version       %s\n", c.ds_version.empty() ? "(none)" : c.ds_version.c_str());
  std::printf("  steps            global %lld, skipped %lld, samples %lld, optimizer step %s\n",
              static_cast<long long>(c.global_steps), static_cast<long long>(c.skipped_steps),
              static_cast<long long>(c.global_samples),
              c.optimizer_step ? std::to_string(*c.optimizer_step).c_str() : "-");
  if (c.loss_scaler.present) {
    std::printf("  loss scaler      %s, scale %g, min %g, iter %lld, last overflow %lld\n",
                c.loss_scaler.dynamic ? "dynamic" : "static", c.loss_scaler.cur_scale, c.loss_scaler.min_scale,
                static_cast<long long>(c.loss_scaler.cur_iter), static_cast<long long>(c.loss_scaler.last_overflow_iter));
  }
  size_t nparams = 0;
  for (const auto& g : c.groups) nparams += g.params.size();
  std::printf("  params           %zu trainable (%s elements) in %zu groups; %zu frozen; %zu buffers; %zu shared\n",
              nparams, grouped(c.trainable_numel()).c_str(), c.groups.size(), c.frozen_params.size(),
              c.buffer_names.size(), c.shared_params.size());
  if (!c.optimizer_state_keys.empty()) {
    std::string k;
    for (const auto& s : c.optimizer_state_keys) k += (k.empty() ? "" : ", ") + s;
    std::printf("  optimizer state  %s\n", k.c_str());
  }
  std::printf("\nGroups\n");
  for (const auto& g : c.groups) {
    std::printf("  #%d  %s elements in %zu params, padded to %s, %s per rank\n", g.index, grouped(g.numel).c_str(),
                g.params.size(), grouped(g.padded_numel).c_str(), grouped(g.partition_numel).c_str());
    for (const auto& p : g.params) {
      std::printf("      %-40s %-14s offset %s\n", p.name.c_str(), shape_text(p.shape).c_str(),
                  grouped(p.offset).c_str());
    }
    for (const auto& rp : g.partitions) {
      std::printf("      rank %d: saved %s, padding %s", rp.rank, grouped(rp.saved_numel).c_str(),
                  grouped(rp.padding).c_str());
      if (layout) {
        for (const auto& f : rp.fragments) {
          std::printf("\n        %s[%lld:%lld] at %lld", g.params[static_cast<size_t>(f.param)].name.c_str(),
                      static_cast<long long>(f.param_offset), static_cast<long long>(f.param_offset + f.numel),
                      static_cast<long long>(f.partition_offset));
        }
      }
      std::printf("\n");
    }
  }
  std::printf("\nFiles\n");
  for (const auto& f : c.files) {
    std::string ranks;
    if (f.dp_rank >= 0) ranks += "dp " + std::to_string(f.dp_rank) + " ";
    if (f.mp_rank >= 0) ranks += "mp " + std::to_string(f.mp_rank);
    std::printf("  %-50s %-6s %-12s %s\n", f.path.c_str(), std::string(role_name(f.role)).c_str(), ranks.c_str(),
                human_bytes(f.bytes).c_str());
  }
  std::printf("\nProblems\n");
  if (c.problems.empty()) std::printf("  none\n");
  for (const auto& p : c.problems) {
    std::printf("  %-7s %-22s %s\n", p.severity.c_str(), p.code.c_str(), p.message.c_str());
  }
}

}  // namespace

int run_inspect(const InspectOptions& o) {
  OpenOptions options;
  options.tag = o.tag;
  const auto ckpt = Checkpoint::open(o.path, options);
  if (o.json) {
    std::printf("%s\n", catalog_to_json(ckpt->catalog()).c_str());
  } else {
    print_text(ckpt->catalog(), o.layout);
    if (const auto* snap = ckpt->snapshot()) {  // a live-engine snapshot (ckptdoc_hook)
      const auto& m = snap->manifest();
      std::printf("\nLive-engine snapshot (ckptdoc_hook): %d rank files, %s gradients recorded; DeepSpeed %s, torch %s\n",
                  m.world_size, m.live.has_grads ? "with" : "no", m.ds_version.c_str(), m.torch_version.c_str());
    }
  }
  return 0;
}

}  // namespace ckptdoc::cli
