#include "ckptdoc/sources/deepspeed/export_warning.h"

namespace ckptdoc::deepspeed {

std::string non_finite_warning(const ExportResult& r, size_t shown) {
  if (r.non_finite.empty()) return {};
  std::string out = r.path + " holds NaN or Inf values in " + std::to_string(r.non_finite.size()) + " of " +
                    std::to_string(r.tensors) + " tensors:";
  for (size_t i = 0; i < r.non_finite.size() && i < shown; ++i) {
    const auto& t = r.non_finite[i];
    out += "\n  " + t.name + ": " + std::to_string(t.nan) + " NaN, " + std::to_string(t.inf) + " Inf of " +
           std::to_string(t.numel) + " values";
  }
  if (r.non_finite.size() > shown)
    out += "\n  \u2026 " + std::to_string(r.non_finite.size() - shown) + " more";
  return out;
}

}  // namespace ckptdoc::deepspeed
