// fp32_from_fp16_params placed on the model's params and compared with them (legacy_mains.h).
#include "legacy_mains.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/compute/nonfinite_as_exact.h"
#include "ckptdoc/dtype.h"
#include "ckptdoc/format/shape_text.h"

namespace ckptdoc::megatron_legacy {
namespace {

// megatron-core's standard override (get_standard_config_overrides, optimizer/__init__.py:113-118 in 0.18.0):
// ParamKey(name="*.bias", predicate=len(param.shape) == 1) matches either.
bool no_weight_decay(const NamedTensor& t) {
  const std::string& n = t.name;
  return t.tensor.shape.size() == 1 || (n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0);
}

bool is_lp(DType d) {
  return d == DType::BF16 || d == DType::F16;
}

// "pp1:" / "pp0ep1:": the stage (and expert rank) a param name belongs to.
std::string stage_of(const RankFolder& f) {
  return "pp" + std::to_string(f.pp) + (f.ep > 0 ? "ep" + std::to_string(f.ep) : "") + ":";
}

}  // namespace

std::optional<std::vector<MainSlot>> map_mains(const RankContent& rank, std::string& why,
                                               std::vector<std::vector<size_t>>* members_out) {
  if (rank.groups.size() != rank.mains.size()) {
    why = std::to_string(rank.mains.size()) + " fp32_from_fp16_params groups beside " +
          std::to_string(rank.groups.size()) + " param groups";
    return std::nullopt;
  }
  // Each group's override must be one ckptdoc knows: the default group or the standard no-weight-decay one.
  std::vector<int> kind(rank.groups.size());  // 0 default, 1 no weight decay
  bool seen[2] = {false, false};
  for (size_t g = 0; g < rank.groups.size(); ++g) {
    const auto& pg = rank.groups[g];
    if (pg.is_expert_parallel || pg.is_decoupled_lr || (pg.lr_mult && *pg.lr_mult != 1.0) || !pg.wd_mult ||
        (*pg.wd_mult != 0.0 && *pg.wd_mult != 1.0)) {
      why = "param group " + std::to_string(g) +
            " has overrides ckptdoc cannot place (expert parallel, a decoupled or scaled lr, or a wd_mult "
            "other "
            "than 0 and 1)";
      return std::nullopt;
    }
    kind[g] = *pg.wd_mult == 0.0 ? 1 : 0;
    if (seen[kind[g]]) {
      why = "two param groups with wd_mult " + std::to_string(*pg.wd_mult);
      return std::nullopt;
    }
    seen[kind[g]] = true;
  }
  std::vector<MainSlot> out;
  std::vector<std::vector<size_t>> all_members;
  for (size_t g = 0; g < rank.groups.size(); ++g) {
    std::vector<size_t> members;  // the group's params, in named_parameters (saved) order
    for (size_t m = 0; m < rank.model.size(); ++m)
      if ((no_weight_decay(rank.model[m]) ? 1 : 0) == kind[g]) members.push_back(m);
    if (members.size() != rank.groups[g].params) {
      why = "param group " + std::to_string(g) + " holds " + std::to_string(rank.groups[g].params) +
            " params, the model " + std::to_string(members.size()) +
            " of its kind (frozen params or tensors that are not params?)";
      return std::nullopt;
    }
    size_t i = 0;
    for (size_t m : members) {
      if (!is_lp(rank.model[m].tensor.dtype)) continue;  // fp32 params keep no fp32_from_fp16 main
      if (i >= rank.mains[g].size()) {
        why = "param group " + std::to_string(g) + " has more 16-bit params than its " +
              std::to_string(rank.mains[g].size()) + " fp32 mains";
        return std::nullopt;
      }
      const auto& main = rank.mains[g][i];
      if (main.shape != rank.model[m].tensor.shape || main.dtype != DType::F32) {
        why = "fp32_from_fp16_params[" + std::to_string(g) + "][" + std::to_string(i) + "] is " +
              std::string(dtype_name(main.dtype)) + " " + shape_text(main.shape) + ", its param " +
              rank.model[m].name + " " + shape_text(rank.model[m].tensor.shape);
        return std::nullopt;
      }
      out.push_back({g, i, m});
      ++i;
    }
    if (i != rank.mains[g].size()) {
      why = "param group " + std::to_string(g) + " has " + std::to_string(rank.mains[g].size()) +
            " fp32 mains for " + std::to_string(i) + " 16-bit params";
      return std::nullopt;
    }
    all_members.push_back(std::move(members));
  }
  if (members_out) *members_out = std::move(all_members);
  return out;
}

LegacyMainComparison compare_mains(const LegacyFolder& folder, const std::vector<RankContent>& ranks,
                                   const std::vector<const DistOptState*>& distopts) {
  LegacyMainComparison c;
  auto backend = make_cpu_backend(1);
  std::map<std::string, size_t> at;  // param name -> index in c.params
  const bool staged = std::any_of(folder.ranks.begin(), folder.ranks.end(),
                                  [](const auto& f) { return f.pp > 0 || f.ep > 0; });
  // One main to compare: its weight, where it sits, and how to read it.
  struct Pending {
    size_t model = 0, group = 0, index = 0;
    int64_t offset = -1;
    std::function<std::vector<float>()> read;
  };
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto& rank = ranks[r];
    const std::string& shown = folder.ranks[r].shown;
    const DistOptState* distopt = r < distopts.size() ? distopts[r] : nullptr;
    c.files.push_back(shown);
    if (!rank.readable()) {
      c.not_compared.push_back(shown + ": not read (" + rank.error + ")");
      continue;
    }
    if (!rank.has_optimizer) {
      c.not_compared.push_back(shown + ": holds no optimizer state (saved with --no-save-optim?)");
      continue;
    }
    std::vector<Pending> pending;
    if (rank.mains.empty() && distopt) {
      if (!distopt->readable()) {
        c.not_compared.push_back(distopt->shown + ": not read (" + distopt->error + ")");
        continue;
      }
      if (distopt->slots.empty()) {
        c.not_compared.push_back(distopt->shown +
                                 ": its fp32 mains cannot be placed on the params: " + distopt->why);
        continue;
      }
      c.files.back() = distopt->shown;  // the findings name the file holding the mains
      c.distrib_optim = true;
      const auto all = std::make_shared<const std::vector<float>>(distopt->param.to_float());  // read once
      for (size_t k = 0; k < distopt->slots.size(); ++k) {
        const auto& slot = distopt->slots[k];
        const int64_t n = rank.model[slot.model].tensor.numel();
        pending.push_back({slot.model, 0, k, slot.start, [all, slot, n] {
                             return std::vector<float>(all->begin() + slot.start,
                                                       all->begin() + slot.start + n);
                           }});
      }
    } else if (rank.mains.empty()) {
      c.not_compared.push_back(shown + ": " +
                               (rank.optimizer_layout.empty() ? "no fp32 mains" : rank.optimizer_layout));
      continue;
    } else {
      std::string why;
      const auto slots = map_mains(rank, why);
      if (!slots) {
        std::string said = shown + ": its fp32 mains cannot be placed on the params: ";
        said += why;
        c.not_compared.push_back(std::move(said));
        continue;
      }
      for (const auto& s : *slots)
        pending.push_back(
            {s.model, s.group, s.index, -1, [&rank, s] { return rank.mains[s.group][s.index].to_float(); }});
    }
    for (const auto& m : pending) {
      const auto& w = rank.model[m.model];
      try {
        const auto weight = w.tensor.to_bytes();
        // a NaN main on a NaN weight counts as exact (nonfinite-values names it), as for Megatron-core
        const auto d = divergence_nonfinite_as_exact(*backend, weight.data(), w.tensor.dtype, m.read());
        // pipeline stages (and expert ranks) each number their own layers from 0: a name is one param per
        // stage
        const std::string name = staged ? stage_of(folder.ranks[r]) + w.name : w.name;
        auto [it, fresh] = at.emplace(name, c.params.size());
        if (fresh) {
          analysis::ParamReport p;
          p.name = name;
          p.group = static_cast<int>(m.group);
          p.shape = w.tensor.shape;
          p.lp_dtype = w.tensor.dtype;
          p.lp_vs_fp32 = DivergenceStats{};
          c.params.push_back(std::move(p));
        }
        auto& p = c.params[it->second];
        p.numel += w.tensor.numel();
        p.lp_vs_fp32->merge(d);
        p.per_rank[static_cast<int>(r)].merge(d);
        c.lp_dtype = w.tensor.dtype;
        c.records.push_back({r, m.group, m.index, m.offset, name, d.exact, d.count});
        ++c.mains_compared;
      } catch (const Error& e) {
        c.not_compared.push_back(shown + ": " + w.name + ": " + e.what());
      }
    }
  }
  return c;
}

std::vector<analysis::Finding> legacy_main_findings(const LegacyMainComparison& c) {
  analysis::MasterContext ctx;
  ctx.lp_dtype = c.lp_dtype;
  ctx.masters = c.distrib_optim ? "fp32 main params (the \"param\" state of distrib_optim.pt)"
                                : "fp32 main params (optimizer.fp32_from_fp16_params in model_optim_rng.pt)";
  ctx.cause =
      "e.g. a --finetune / --no-load-optim load that never called optimizer.reload_model_params(), "
      "Megatron-LM #174";
  ctx.fix =
      "ckptdoc repair --refresh-fp32 (each main := its weight upcast, in a copy), or Megatron-LM's "
      "optimizer.reload_model_params() after loading the weights";
  ctx.files_of = [&c](const std::set<int>& ranks) {
    std::vector<std::string> out;
    for (int r : ranks)
      if (r >= 0 && static_cast<size_t>(r) < c.files.size()) out.push_back(c.files[static_cast<size_t>(r)]);
    return out;
  };
  std::vector<analysis::Finding> out;
  analysis::master_findings(c.params, ctx, {}, out);
  return out;
}

}  // namespace ckptdoc::megatron_legacy
