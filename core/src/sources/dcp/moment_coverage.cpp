// Which weights a DCP save's Adam state belongs to is known from names alone: optimizer.state.<param>.* is
// taken to be the state of weight <param>. Where the names do not meet, the verdict says so instead of
// implying the moments cover the weights: torchtitan's llama3 saves its fused attention parameter's state as
// `...qkv_linear.wqkv.weight` and the weight itself split, by a state-dict hook, as `wq` / `wk` / `wv`.
#include <set>

#include "ckptdoc/plural.h"
#include "ckptdoc/sources/dcp/diagnose.h"
#include "ckptdoc/sources/dcp/export.h"  // is_model_key

namespace ckptdoc::dcp {
namespace {

// "a, b, ..." of the first two.
std::string first_of(const std::set<std::string>& names) {
  std::string out;
  size_t n = 0;
  for (const auto& name : names) {
    if (n++ == 2) return out + ", ...";
    out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

}  // namespace

std::optional<std::string> moment_coverage_gap(const Metadata& md) {
  std::set<std::string> weights, params;
  for (const auto& e : md.entries) {
    if (e.kind != EntryKind::Tensor) continue;
    if (auto p = optimizer_state_param(e.key, "exp_avg"); !p.empty())
      params.insert(p);
    else if (is_model_key(e.key))
      weights.insert(e.key.rfind("model.", 0) == 0 ? e.key.substr(6) : e.key);  // Accelerate's model.<fqn>
  }
  if (weights.empty() || params.empty()) return std::nullopt;  // an optimizer-only or model-only folder
  std::set<std::string> orphans, bare;
  for (const auto& p : params)
    if (!weights.count(p)) orphans.insert(p);
  for (const auto& w : weights)
    if (!params.count(w)) bare.insert(w);
  if (orphans.empty() && bare.empty()) return std::nullopt;
  std::string text = "the Adam moments were matched to the weights by name alone, and ";
  if (!orphans.empty())
    text += plural(orphans.size(), "optimizer param") + " name" + (orphans.size() == 1 ? "s" : "") +
            " no weight (" + first_of(orphans) + ")" + (bare.empty() ? "" : " and ");
  if (!bare.empty())
    text += plural(bare.size(), "weight") +
            (bare.size() == 1 ? " has no optimizer state under its name ("
                              : " have no optimizer state under their names (") +
            first_of(bare) + ")";
  return text +
         ": a state-dict hook that renames or splits a parameter saves them so (torchtitan's fused wqkv "
         "as wq, wk, wv), and a frozen weight has no state";
}

}  // namespace ckptdoc::dcp
