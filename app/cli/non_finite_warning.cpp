#include "non_finite_warning.h"

#include <cstdio>

namespace ckptdoc::cli {

// The written file holds weights no model can use: said on stderr whatever --quiet or --json say.
void warn_non_finite(const deepspeed::ExportResult& r) {
  if (r.non_finite.empty()) return;
  std::fprintf(stderr,
               "ckptdoc: warning: %s holds NaN or Inf values in %zu of %zu tensors (--strict refuses to "
               "write them):\n",
               r.path.c_str(), r.non_finite.size(), r.tensors);
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < r.non_finite.size() && i < kShown; ++i) {
    const auto& t = r.non_finite[i];
    std::fprintf(stderr, "  %s: %llu NaN, %llu Inf of %llu values\n", t.name.c_str(),
                 static_cast<unsigned long long>(t.nan), static_cast<unsigned long long>(t.inf),
                 static_cast<unsigned long long>(t.numel));
  }
  if (r.non_finite.size() > kShown)
    std::fprintf(stderr, "  … %zu more (--json lists all)\n", r.non_finite.size() - kShown);
}

}  // namespace ckptdoc::cli
