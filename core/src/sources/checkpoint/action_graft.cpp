// Repair action --repartition --target DIR: graft a checkpoint onto a template's layout (added params keep
// the template's values, carried ones bring their masters, weights and moments).
#include <algorithm>
#include <filesystem>
#include <map>

#include "ckptdoc/error.h"
#include "sources/checkpoint/runner.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair::detail {

using deepspeed::FileRole;
using deepspeed::FloatFill;
using deepspeed::GroupLayout;
using deepspeed::OptimizerWrapper;
using deepspeed::ParamEntry;

void Runner::graft() {
  auto tmpl = deepspeed::Checkpoint::open(*rq_.target);
  const auto& tc = tmpl->catalog();
  const SourceLayout src = source_layout(ckpt_);
  const SourceLayout tl = source_layout(*tmpl);
  const StateReader sreader(ckpt_, src);
  const StateReader treader(*tmpl, tl);
  std::map<std::string, bool> carried;
  for (const auto& [name, place] : tl.params) {
    const auto it = src.params.find(name);
    carried[name] = it != src.params.end() && it->second.shape == place.shape;
  }
  const int tdp = tl.dp;
  const ParamRead fp32_read = [&](const std::string& name, int64_t first, int64_t cnt, float* out) {
    if (carried.at(name))
      sreader.read("fp32", name, first, cnt, out);
    else
      treader.read("fp32", name, first, cnt, out);
  };
  auto moment_read = [&](const std::string& key) {
    return ParamRead([&, key](const std::string& name, int64_t first, int64_t cnt, float* out) {
      if (carried.at(name))
        sreader.read(key, name, first, cnt, out);
      else
        std::fill(out, out + cnt, 0.0f);
    });
  };
  // A state entry of the source (rank 0, group 0) gives the step and the set of moment keys.
  const Value& sosd = ckpt_.optimizer_state(0);
  const Value* sbos = sosd.get("base_optimizer_state");
  const Value* sstate = sbos ? sbos->get("state") : nullptr;
  const Value* sentry = nullptr;
  if (sstate && sstate->is_dict() && !sstate->as_dict().items.empty())
    sentry = &sstate->as_dict().items.front().second;

  for (const auto& f : tc.files) {
    if (f.role == FileRole::Optim) {
      const int r = f.dp_rank;
      Value root = tmpl->optim_file(r, f.mp_rank).root.clone();
      Value* osd = need(&root, "optimizer_state_dict", f.path);
      Value* parts = need(osd, "single_partition_of_fp32_groups", f.path);
      auto& items = parts->items_mut();
      Value* bos = need(osd, "base_optimizer_state", f.path);
      Value state = Value::dict();
      for (size_t gi = 0; gi < items.size() && gi < tl.groups.size(); ++gi) {
        const GroupLayout& g = tl.groups[gi];
        const int64_t base = static_cast<int64_t>(r) * g.partition_numel;
        const int64_t L = items[gi].as_tensor().numel();
        items[gi] = Value::tensor(
            deepspeed::produced_f32(L, guarded([&g, base, fp32_read](int64_t first, int64_t cnt, float* out) {
                                      fill_zero12_flat(g, base + first, cnt, out, fp32_read);
                                    }),
                                    g.partition_numel, true));
        if (sentry && !rq_.reset_optimizer) {
          const int64_t slen = src.groups.front().partition_numel;
          state.set_item(Value::integer(static_cast<int64_t>(gi)),
                         remap_state_entry(*sentry, slen, g.partition_numel,
                                           [&g, base, moment_read](const std::string& key, int64_t first,
                                                                   int64_t cnt, float* out) {
                                             fill_zero12_flat(g, base + first, cnt, out, moment_read(key));
                                           }));
        }
      }
      bos->set("state", state);
      if (rq_.reset_optimizer) erase_group_steps(bos->get_mut("param_groups"));
      // Hyper-parameters and loss scale continue from the source run.
      if (const Value* sgroups = sbos ? sbos->get("param_groups") : nullptr) {
        Value* tgroups = bos->get_mut("param_groups");
        if (tgroups && tgroups->is_sequence() && sgroups->is_sequence() &&
            tgroups->items().size() == sgroups->items().size() && !rq_.reset_optimizer) {
          for (size_t gi = 0; gi < tgroups->items().size(); ++gi) {
            Value g = sgroups->items()[gi].clone();
            g.set("params", tgroups->items()[gi].at("params").clone());
            tgroups->items_mut()[gi] = g;
          }
        }
      }
      for (const char* key : {"loss_scaler", "dynamic_loss_scale", "overflow", "clip_grad"})
        if (const Value* v = sosd.get(key); v && osd->get(key)) osd->set(key, v->clone());
      write(f.path, root);
    } else if (f.role == FileRole::Model) {
      Value root = tmpl->model_file(f.mp_rank, 0).root.clone();
      Value* module = need(&root, "module", f.path);
      for (auto& [k, v] : module->dict_mut().items) {
        if (!k.is(Value::Kind::Str)) continue;
        const auto it = carried.find(k.as_str());
        if (it == carried.end() || !it->second) continue;
        if (auto t = ckpt_.lp_param(k.as_str())) v = Value::tensor(*t);
      }
      const Value& sroot = ckpt_.model_file(0, 0).root;
      for (const char* key : {"global_steps", "global_samples", "skipped_steps", "lr_scheduler"})
        if (const Value* v = sroot.get(key)) root.set(key, v->clone());
      root.set("dp_world_size", Value::integer(tdp));
      write(f.path, root);
    } else if (std::error_code ec; fs::is_regular_file(f.abs_path, ec)) {
      deepspeed::copy_file(f.abs_path, tag_out_ + "/" + f.path, io_);
    }
  }
}

}  // namespace ckptdoc::repair::detail
