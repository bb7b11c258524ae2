// Repair actions that keep the layout and the file set: --refresh-fp32, --reset-optimizer, --drop-optimizer.
#include <algorithm>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "sources/checkpoint/runner.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair::detail {

using deepspeed::FileRole;
using deepspeed::FloatFill;
using deepspeed::GroupLayout;
using deepspeed::OptimizerWrapper;
using deepspeed::ParamEntry;

void Runner::rewrite_in_layout() {
  const OptimizerWrapper w = cat_.wrapper;
  SourceLayout layout = source_layout(ckpt_);
  LpReader lp(*backend_);
  std::shared_ptr<void> keep;
  if (rq_.refresh_fp32) {
    if (w == OptimizerWrapper::Zero3)
      keep = add_file_lp(*rq_.lp_source, lp);
    else
      add_module_lp(ckpt_, layout, lp);
  }
  const ParamRead lp_read = [&lp](const std::string& name, int64_t first, int64_t n, float* out) {
    lp.read(name, first, n, out);
  };
  for (const auto& f : cat_.files) {
    if ((f.role == FileRole::Model || f.role == FileRole::Optim) && !owns(f)) continue;  // another mp rank's
    if (f.role == FileRole::Model) {
      if (w == OptimizerWrapper::FP16Optimizer &&
          (rq_.reset_optimizer || rq_.drop_optimizer || rq_.refresh_fp32)) {
        Value root = ckpt_.model_file(f.mp_rank, std::max(f.dp_rank, 0)).root.clone();
        if (rq_.drop_optimizer) {
          root.set("optimizer", Value::none());
        } else {
          if (rq_.refresh_fp32) refresh_fused_masters(root, f.path, lp_read);
          if (rq_.reset_optimizer) {
            Value* osd = need(need(&root, "optimizer", f.path), "optimizer_state_dict", f.path);
            osd->set("state", Value::dict());
            erase_group_steps(osd->get_mut("param_groups"));
          }
        }
        write(f.path, root);
      } else if (w == OptimizerWrapper::FP16UnfusedOptimizer && rq_.refresh_fp32) {
        Value root = ckpt_.model_file(f.mp_rank, std::max(f.dp_rank, 0)).root.clone();
        refresh_unfused_masters(root, f.path, lp_read);
        write(f.path, root);
      } else {
        copy(f);
      }
      continue;
    }
    if (f.role != FileRole::Optim) continue;
    if (rq_.drop_optimizer) continue;
    if (rq_.restore_model_files) {
      copy(f);
      continue;
    }
    const int r = f.dp_rank;
    Value root = ckpt_.optim_file(r, f.mp_rank).root.clone();
    Value* osd = need(&root, "optimizer_state_dict", f.path);
    if (rq_.refresh_fp32) {
      if (w == OptimizerWrapper::Zero3) {
        Value* flat = need(osd, "fp32_flat_groups", f.path);
        auto& items = flat->items_mut();
        for (size_t k = 0; k < items.size(); ++k) {
          const GroupLayout* gp = cat_.group_in_file(static_cast<int>(k), r);
          if (!gp) continue;
          const GroupLayout& g = *gp;
          const int dp = layout.dp;
          const int64_t len = items[k].as_tensor().numel();
          items[k] = Value::tensor(deepspeed::produced_f32(
              len, guarded([&g, r, dp, lp_read](int64_t first, int64_t n, float* out) {
                fill_zero3_part(g, r, dp, first, n, out, lp_read);
              })));
        }
      } else {
        Value* parts = need(osd, "single_partition_of_fp32_groups", f.path);
        auto& items = parts->items_mut();
        for (size_t gi = 0; gi < items.size(); ++gi) {
          // An expert group: the instance of this rank's expert-parallel rank, at its partition index.
          const GroupLayout* gp = cat_.group_in_file(static_cast<int>(gi), r);
          if (!gp) continue;
          const GroupLayout& g = *gp;
          const Tensor& old = items[gi].as_tensor();
          const int64_t P = g.partition_numel;
          const int64_t L = old.numel();
          if (L > P)
            throw Error(ErrorKind::Inconsistent, f.abs_path,
                        "single_partition_of_fp32_groups[" + std::to_string(gi) + "]",
                        expected_found("at most " + std::to_string(P) + " elements", std::to_string(L)));
          const int64_t base = static_cast<int64_t>(g.partition_index(r)) * P;
          auto fill = guarded([&g, base, lp_read](int64_t first, int64_t n, float* out) {
            fill_zero12_flat(g, base + first, n, out, lp_read);
          });
          if (old.dtype == DType::BF16 || old.dtype == DType::F16) {
            // Masters kept in 16 bits (bf16_master_weights_and_grads): written in their own dtype, where the
            // 16-bit weights they are refreshed from fit exactly.
            Tensor t =
                deepspeed::view_of(deepspeed::produced_lp_storage(old.dtype, P, fill), old.dtype, {L}, 0);
            t.requires_grad = old.requires_grad;
            items[gi] = Value::tensor(std::move(t));
          } else {
            items[gi] = Value::tensor(deepspeed::produced_f32(L, fill, P, old.requires_grad));
          }
        }
      }
    }
    if (rq_.reset_optimizer) {
      Value* inner = w == OptimizerWrapper::Zero3 ? need(osd, "optimizer_state_dict", f.path)
                                                  : need(osd, "base_optimizer_state", f.path);
      if (inner->is_dict()) {
        inner->set("state", Value::dict());
        erase_group_steps(inner->get_mut("param_groups"));
      } else if (inner->is_sequence()) {  // elastic list: one dict of state per group
        for (auto& e : inner->items_mut()) e = Value::dict();
      }
      osd->erase("base_optimizer_state_step");
    }
    write(f.path, root);
  }
  if (rq_.restore_model_files) restore_model_files();
  copy_other_files();
}

// ZeRO-3 ranks save the same model file (make_plan refuses jobs with frozen params, whose fragments differ):
// each rank the plan chose gets the plan's source rank's bytes under its own name.
void Runner::restore_model_files() {
  const deepspeed::CheckpointFile* from = cat_.model_file(-1, plan_.restore_from);
  if (!from)
    throw Error(ErrorKind::Inconsistent, cat_.tag_dir, "", "the plan's source model file is not here");
  for (int r : plan_.restored_ranks) {
    deepspeed::copy_file(from->abs_path, tag_out_ + "/" + deepspeed::model_file_name(3, r), io_);
    tick();
  }
}

// FP16_UnfusedOptimizer: each master of optimizer.fp32_groups (flat group k, group by group) rewritten from
// its param's 16-bit weight, in its own shape and dtype.
void Runner::refresh_unfused_masters(Value& root, const std::string& path, const ParamRead& lp_read) {
  Value* groups = need(need(&root, "optimizer", path), "fp32_groups", path);
  size_t k = 0;
  for (auto& list : groups->items_mut())
    for (auto& item : list.items_mut()) {
      if (k >= cat_.groups.size())
        throw Error(ErrorKind::Inconsistent, path, "optimizer.fp32_groups",
                    "more masters than the catalog matched to params");
      const ParamEntry& p = cat_.groups[k++].params.front();
      const Tensor& old = item.as_tensor();
      if (old.numel() != p.numel)
        throw Error(ErrorKind::Inconsistent, path, "optimizer.fp32_groups: " + p.name,
                    expected_found(std::to_string(p.numel) + " elements", std::to_string(old.numel())));
      const std::string name = p.name;
      FloatFill fill =
          guarded([name, lp_read](int64_t first, int64_t n, float* out) { lp_read(name, first, n, out); });
      Tensor t = old.dtype == DType::BF16 || old.dtype == DType::F16
                     ? deepspeed::view_of(deepspeed::produced_lp_storage(old.dtype, p.numel, fill), old.dtype,
                                          p.shape, 0)
                     : deepspeed::produced_f32(p.numel, fill, p.numel, old.requires_grad);
      t.shape = p.shape;
      t.strides = Tensor::contiguous_strides(p.shape);
      t.requires_grad = old.requires_grad;
      item = Value::tensor(std::move(t));
    }
}

// FP16_Optimizer: each flat master of optimizer.fp32_groups_flat (catalog group g: its params at their
// offsets, no padding) rewritten from the 16-bit weights of the params it holds, in fp32.
void Runner::refresh_fused_masters(Value& root, const std::string& path, const ParamRead& lp_read) {
  Value* flats = need(need(&root, "optimizer", path), "fp32_groups_flat", path);
  size_t g = 0;
  for (auto& item : flats->items_mut()) {
    if (g >= cat_.groups.size())
      throw Error(ErrorKind::Inconsistent, path, "optimizer.fp32_groups_flat",
                  "more flat masters than the catalog matched to param groups");
    const GroupLayout& G = cat_.groups[g++];
    const Tensor& old = item.as_tensor();
    if (old.numel() != G.numel)
      throw Error(ErrorKind::Inconsistent, path,
                  "optimizer.fp32_groups_flat[" + std::to_string(G.index) + "]",
                  expected_found(std::to_string(G.numel) + " elements", std::to_string(old.numel())));
    const std::vector<ParamEntry> params = G.params;
    FloatFill fill = guarded([params, lp_read](int64_t first, int64_t n, float* out) {
      for (const auto& p : params) {  // the params covering [first, first + n), in flat order
        const int64_t lo = std::max(first, p.offset), hi = std::min(first + n, p.offset + p.numel);
        if (lo < hi) lp_read(p.name, lo - p.offset, hi - lo, out + (lo - first));
      }
    });
    item = Value::tensor(deepspeed::produced_f32(G.numel, fill, G.numel, old.requires_grad));
  }
}

}  // namespace ckptdoc::repair::detail
