// The dcp-non-finite findings of a bucket-space save judged with the bucket map (see bucket_nonfinite.h).
#include "bucket_nonfinite.h"

#include <algorithm>
#include <optional>

#include "bucket_checks.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/plural.h"
#include "ckptdoc/short_list.h"

namespace ckptdoc::megatron {
namespace {

// Whether the map places the dp group of bucket tensor `key` (of its optimizer: chained_<c>. or none).
bool placed(const BucketMap* map, const std::string& key) {
  const auto k = parse_bucket_key(key);
  return map && k && std::any_of(map->groups.begin(), map->groups.end(), [&](const auto& g) {
           return g.chained == k->chained && g.index == k->group;
         });
}

int64_t nonfinite_of(const dcp::Report& r, const std::string& key) {
  for (const auto& t : r.tensors)
    if (t.key == key) return t.nan + t.inf;
  return 0;
}

}  // namespace

BucketNonfinite judge_bucket_nonfinite(dcp::Report& r, const dcp::Checkpoint& ckpt,
                                       const MainParamComparison& mains) {
  BucketNonfinite out;
  if (!mains.bucket_space) return out;
  const auto nonfinite = model::code_name(model::Code::DcpNonFinite);
  std::erase_if(r.problems, [&](dcp::Problem& p) {
    if (p.code != nonfinite) return false;
    if (is_bucket_state_key(p.key) && !placed(mains.map.get(), p.key)) {
      out.unjudged += nonfinite_of(r, p.key);
      out.unjudged_keys.push_back(p.key);
      return true;
    }
    if (!mains.map) return false;
    const auto* e = ckpt.metadata().find(p.key);
    std::optional<NonfinitePlaces> places;
    try {
      places = e ? nonfinite_places(ckpt, *mains.map, *e) : std::nullopt;
    } catch (const Error&) {  // an unreadable chunk: the DCP diagnosis names it
    }
    if (!places) return false;
    if (places->bucket && places->in_params == 0) {
      out.in_gaps += nonfinite_of(r, p.key);  // every NaN/Inf of the tensor lies in its gaps
      return true;
    }
    std::string where;
    for (const auto& [name, n] : places->params) {
      where += (where.empty() ? "" : ", ") + name + " (" + std::to_string(n) + ")";
      p.params.push_back(name);
    }
    p.message += (places->bucket ? "; in the slices of " : "; in ") + where;
    // the count above is the whole tensor's: say how many of it lie in the gaps (uninitialised memory)
    const auto in_gaps = nonfinite_of(r, p.key) - static_cast<int64_t>(places->in_params);
    if (places->bucket && in_gaps > 0)
      p.message += "; " + std::to_string(in_gaps) + " more in the 64-alignment gaps, not judged";
    else if (places->bucket)
      p.message += " (the 64-alignment gaps' values are not judged)";
    return false;
  });
  if (out.in_gaps > 0)
    out.not_checked.push_back(plural(out.in_gaps, "NaN/Inf element") +
                              " in the bucket-space state's 64-alignment gaps (memory no param owns, saved "
                              "uninitialised): not judged");
  if (!out.unjudged_keys.empty()) {
    std::string why;
    for (const auto& w : mains.map_refused) why += (why.empty() ? "" : "; ") + w;
    if (why.empty()) why = "their dp group has no param bucket to map";
    out.not_checked.push_back(
        plural(out.unjudged, "NaN/Inf element") + " of " + plural(out.unjudged_keys.size(), "bucket tensor") +
        " (" + short_list(out.unjudged_keys, 3, "; ") +
        ") not judged: the param -> slice map of the bucket-space state was refused (" + why +
        "), so the 64-alignment gaps between params (memory no param owns, saved uninitialised, where "
        "NaN/Inf "
        "are normal) cannot be told from the params' main params and moments");
  }
  return out;
}

}  // namespace ckptdoc::megatron
