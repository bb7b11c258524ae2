// check_loader_invariants: what DeepSpeed's load_checkpoint needs from a checkpoint (deepspeed-format.md
// §6.1, §6.4), checked on the files themselves. It reads DeepSpeed's rank files, so it lives with DeepSpeed's
// source; the repair's verification and the snapshot conversion call it.
#include <filesystem>
#include <memory>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/layout.h"
#include "ckptdoc/sources/deepspeed/writer.h"

namespace fs = std::filesystem;

namespace ckptdoc::repair {

using deepspeed::FileRole;
using deepspeed::OptimizerWrapper;

namespace {

std::string s(int64_t v) {
  return std::to_string(v);
}

const Value* int_entry(const Value* d, int64_t key) {
  if (!d || !d->is_dict()) return nullptr;
  for (const auto& [k, v] : d->as_dict().items)
    if (k.is(Value::Kind::Int) && k.as_int() == key) return &v;
  return nullptr;
}

}  // namespace

namespace {
void check_slice(const deepspeed::Checkpoint& ckpt, bool only_present_files, std::vector<std::string>& fail);
}  // namespace

std::vector<std::string> check_loader_invariants(const deepspeed::Checkpoint& ckpt, bool only_present_files) {
  std::vector<std::string> fail;
  // A tensor/pipeline-parallel job: every model-parallel rank's files, each against its own layout.
  for (int m = 0; m < ckpt.slice_count(); ++m) {
    std::shared_ptr<const deepspeed::Checkpoint> slice;
    try {
      slice = ckpt.slice(m);
    } catch (const Error& e) {
      fail.push_back(std::string("model-parallel rank ") + std::to_string(m) +
                     " cannot be opened: " + e.what());
      continue;
    }
    check_slice(*slice, only_present_files, fail);
  }
  return fail;
}

namespace {

void check_slice(const deepspeed::Checkpoint& ckpt, bool only_present_files, std::vector<std::string>& fail) {
  const auto& cat = ckpt.catalog();
  auto bad = [&](std::string m) {
    fail.push_back(cat.slice_label().empty() ? std::move(m) : cat.slice_label() + ": " + m);
  };
  const bool first = cat.mp_rank == 0;  // job-wide checks run once, unlabelled
  auto bad_job = [&](std::string m) { fail.push_back(std::move(m)); };

  // 1. latest -> tag folder; model files for every mp rank with the required keys.
  const fs::path latest = fs::path(cat.save_dir) / "latest";
  std::error_code ec;
  if (first && !fs::is_regular_file(latest, ec)) bad_job("no `latest` file in " + cat.save_dir);
  if (first && !fs::is_directory(cat.tag_dir, ec)) bad_job("tag folder " + cat.tag_dir + " missing");
  const bool zero3 = cat.wrapper == OptimizerWrapper::Zero3;
  const int mp = std::max(cat.mp_world_size, 1);
  const int dp = cat.dp_world_size;
  for (int m = 0; m < (first ? mp : 0); ++m) {
    for (int r = 0; r < (zero3 ? std::max(dp, 1) : 1); ++r) {
      if (!cat.model_file(m, r)) {
        if (only_present_files && zero3) continue;
        bad_job("model-states file for mp rank " + s(m) + (zero3 ? ", dp rank " + s(r) : "") + " missing");
        continue;
      }
      try {
        const Value& root = ckpt.model_file(m, r).root;
        for (const char* key : {"module", "dp_world_size", "mp_world_size", "global_steps", "skipped_steps"})
          if (!root.get(key)) bad_job(cat.model_file(m, r)->path + ": key '" + key + "' missing");
        const Value* mws = root.get("mp_world_size");
        if (mws && mws->is(Value::Kind::Int) && mws->as_int() != mp)
          bad_job(cat.model_file(m, r)->path + ": mp_world_size " + s(mws->as_int()) + " but " + s(mp) +
                  " model files");
      } catch (const Error& e) {
        bad_job(std::string("unreadable model file: ") + e.what());
      }
    }
  }

  // 1b. The lp weights DeepSpeed loads from pipeline layer files and MoE expert files: every param's is
  // there.
  for (const auto& g : cat.groups)
    for (const auto& p : g.params)
      if ((cat.topology.pipeline || g.expert) && !cat.lp_locations.count(p.name))
        bad("no layer or expert file holds the 16-bit weight of " + p.name);

  const bool partitioned =
      cat.wrapper == OptimizerWrapper::Zero12 || cat.wrapper == OptimizerWrapper::BF16Optimizer || zero3;
  if (!partitioned) return;  // weights-only (load_optimizer_states=False) or a non-ZeRO wrapper

  // 4/5. dp_world_size == number of optimizer files == partition_count; one file per rank, lp-matching
  // prefix.
  if (cat.optim_file_count != dp && !only_present_files)
    bad("dp_world_size is " + s(dp) + " but there are " + s(cat.optim_file_count) + " optimizer files");
  for (size_t g = 0; g < cat.partition_count.size(); ++g) {
    // MoE expert groups are partitioned over the expert-data-parallel ranks: dp / ep of them.
    const auto* G = cat.group_in_file(static_cast<int>(g), 0);
    const int64_t want = G ? static_cast<int64_t>(G->partitions.size()) : dp;
    if (cat.partition_count[g] != want)
      bad("partition_count " + s(cat.partition_count[g]) + " of group " + s(static_cast<int64_t>(g)) +
          " differs from " + s(want) +
          (want != dp ? " (its expert-data-parallel size)" : " (dp_world_size)"));
  }
  const bool want_bf16 = cat.lp_dtype == DType::BF16;
  for (int r = 0; r < dp; ++r) {
    const auto* f = cat.optim_file(r);
    if (!f) {
      if (!only_present_files) bad("optimizer file of dp rank " + s(r) + " missing");
      continue;
    }
    if (f->bf16_prefix != want_bf16)
      bad(f->path + ": a " + std::string(want_bf16 ? "bf16" : "non-bf16") + " engine looks for " +
          deepspeed::optim_file_name(want_bf16, r));
  }

  // 6/7. Per-rank optimizer state shapes.
  for (int r = 0; r < dp; ++r) {
    if (!cat.optim_file(r)) continue;
    try {
      const Value& osd = ckpt.optimizer_state(r);
      const std::string where = cat.optim_file(r)->path + ": ";
      if (!zero3) {
        if (cat.wrapper == OptimizerWrapper::Zero12)
          for (const char* key : {"loss_scaler", "dynamic_loss_scale", "overflow"})
            if (!osd.get(key)) bad(where + "key '" + key + "' missing");
        const Value* ver = osd.get("ds_version");
        if (!ver || !ver->is(Value::Kind::Str) || !deepspeed::parse_ds_version(ver->as_str()))
          bad(where + "ds_version missing or not a version");
        const Value* bos = osd.get("base_optimizer_state");
        const Value* parts = osd.get("single_partition_of_fp32_groups");
        if (!bos || !bos->is_dict()) {
          bad(where + "base_optimizer_state is not a (rigid) dict");
          continue;
        }
        const Value* pgs = bos->get("param_groups");
        const auto G = static_cast<size_t>(cat.file_group_count());
        if (!pgs || !pgs->is_sequence() || pgs->items().size() != G) {
          bad(where + "base_optimizer_state has " +
              s(pgs && pgs->is_sequence() ? static_cast<int64_t>(pgs->items().size()) : -1) +
              " param groups, expected " + s(static_cast<int64_t>(G)));
          continue;
        }
        for (size_t g = 0; g < G; ++g) {
          const Value* ps = pgs->items()[g].get("params");
          if (!ps || !ps->is_sequence() || ps->items().size() != 1 ||
              ps->items()[0].as_int() != static_cast<int64_t>(g))
            bad(where + "param_groups[" + s(static_cast<int64_t>(g)) + "]['params'] is not [" +
                s(static_cast<int64_t>(g)) + "]");
          const auto* layout = cat.group_in_file(static_cast<int>(g), r);
          if (!layout) {
            bad(where + "group " + s(static_cast<int64_t>(g)) +
                " has no partition on this rank in the layout");
            continue;
          }
          const int64_t P = layout->partition_numel;
          if (const Value* e = int_entry(bos->get("state"), static_cast<int64_t>(g))) {
            for (const auto& [k, v] : e->as_dict().items)
              if (v.is_tensor() && !v.as_tensor().shape.empty() && v.as_tensor().numel() != P)
                bad(where + "state[" + s(static_cast<int64_t>(g)) + "]['" + k.as_str() + "'] has " +
                    s(v.as_tensor().numel()) + " elements, expected P = " + s(P));
          }
          if (!parts || !parts->is_sequence() || parts->items().size() != G) {
            bad(where + "single_partition_of_fp32_groups does not have one tensor per group");
            break;
          }
          const int64_t L = parts->items()[g].as_tensor().numel();
          if (L > P)
            bad(where + "fp32 partition of group " + s(static_cast<int64_t>(g)) + " has " + s(L) +
                " > P = " + s(P));
          if (cat.wrapper == OptimizerWrapper::BF16Optimizer && L != P)
            bad(where + "BF16_Optimizer fp32 partition of group " + s(static_cast<int64_t>(g)) +
                " is not the full P");
        }
      } else {
        for (const char* key : {"loss_scaler", "dynamic_loss_scale", "overflow"})
          if (!osd.get(key)) bad(where + "key '" + key + "' missing");
        const Value* flat = osd.get("fp32_flat_groups");
        const size_t K = cat.groups.size();
        if (!flat || !flat->is_sequence() || flat->items().size() != K) {
          bad(where + "fp32_flat_groups does not have one tensor per sub-group (" +
              s(static_cast<int64_t>(K)) + ")");
          continue;
        }
        for (size_t k = 0; k < K; ++k) {
          int64_t want = 0;
          for (const auto& p : cat.groups[k].params) want += deepspeed::zero3_partition_numel(p.numel, dp);
          const int64_t have = flat->items()[k].as_tensor().numel();
          if (have != want)
            bad(where + "fp32_flat_groups[" + s(static_cast<int64_t>(k)) + "] has " + s(have) +
                " elements, expected " + s(want));
          const Value* inner = osd.get("optimizer_state_dict");
          if (const Value* e = int_entry(inner ? inner->get("state") : nullptr, static_cast<int64_t>(k)))
            for (const auto& [key, v] : e->as_dict().items)
              if (v.is_tensor() && !v.as_tensor().shape.empty() && v.as_tensor().numel() != want)
                bad(where + "state[" + s(static_cast<int64_t>(k)) + "]['" + key.as_str() +
                    "'] has wrong length");
        }
        // param_groups[g]['params'] lists sub-group ids: all of 0..K-1 exactly once.
        const Value* inner = osd.get("optimizer_state_dict");
        const Value* pgs = inner ? inner->get("param_groups") : nullptr;
        std::vector<int> seen(K, 0);
        if (pgs && pgs->is_sequence())
          for (const auto& pg : pgs->items())
            if (const Value* ids = pg.get("params"); ids && ids->is_sequence())
              for (const auto& id : ids->items())
                if (id.as_int() >= 0 && static_cast<size_t>(id.as_int()) < K)
                  ++seen[static_cast<size_t>(id.as_int())];
        for (size_t k = 0; k < K; ++k)
          if (seen[k] != 1)
            bad(where + "sub-group " + s(static_cast<int64_t>(k)) +
                " is not listed exactly once in param_groups");
      }
    } catch (const Error& e) {
      bad(std::string("unreadable optimizer file: ") + e.what());
    }
  }
}

}  // namespace

}  // namespace ckptdoc::repair
