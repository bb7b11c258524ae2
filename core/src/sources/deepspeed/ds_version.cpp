// ds_version parsing and the ZeRO-1/2 layout rules that depend on it (deepspeed-format.md §5.1, §12).
#include <charconv>

#include "ckptdoc/sources/deepspeed/layout.h"

namespace ckptdoc::deepspeed {

std::optional<DsVersion> parse_ds_version(const std::string& text) {
  DsVersion v;
  int* parts[3] = {&v.major, &v.minor, &v.patch};
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 3; ++i) {
    auto [next, ec] = std::from_chars(p, end, *parts[i]);
    if (ec != std::errc()) {
      if (i == 0) return std::nullopt;
      break;  // "0.12" is 0.12.0
    }
    p = next;
    if (i < 2) {
      if (p == end || *p != '.') break;
      ++p;
    }
  }
  return v;
}

Zero12Rules zero12_rules_for_version(const std::string& ds_version) {
  Zero12Rules r;
  if (ds_version.empty()) {  // no ds_version key: written before v0.4.0
    r.alignment_factor = 1;
    r.padding = PaddingRule::LastRankModDp;
    return r;
  }
  const auto v = parse_ds_version(ds_version);
  if (!v) return r;  // unparsable: assume the newest rules
  r.alignment_factor = *v >= DsVersion{0, 5, 2} ? 2 : 1;
  if (*v >= DsVersion{0, 16, 4}) {
    r.padding = PaddingRule::Exact;
  } else if (*v >= DsVersion{0, 7, 0}) {
    r.padding = PaddingRule::LastRankTotal;
  } else {
    r.padding = PaddingRule::LastRankModDp;
  }
  r.round_robin = *v >= DsVersion{0, 4, 0} && *v < DsVersion{0, 4, 4};
  r.expert_mappings_use_global_dp = *v < DsVersion{0, 14, 5};
  return r;
}

}  // namespace ckptdoc::deepspeed
