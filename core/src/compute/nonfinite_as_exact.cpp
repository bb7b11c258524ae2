#include "ckptdoc/compute/nonfinite_as_exact.h"

#include <cmath>
#include <cstring>

namespace ckptdoc {

DivergenceStats divergence_nonfinite_as_exact(Backend& backend, const uint8_t* weight, DType lp,
                                              std::vector<float> main) {
  auto d = backend.divergence(weight, lp, main.data(), main.size());
  if (d.nonfinite == 0) return d;
  const size_t esize = element_size(lp);
  std::vector<uint8_t> box(weight, weight + main.size() * esize);
  for (size_t i = 0; i < main.size(); ++i) {
    uint16_t bits = 0;
    std::memcpy(&bits, box.data() + i * esize, sizeof bits);
    const float w = lp == DType::BF16 ? bf16_to_float(bits) : half_to_float(bits);
    if ((std::isnan(main[i]) && std::isnan(w)) || (std::isinf(main[i]) && main[i] == w)) {
      main[i] = 0;
      std::memset(box.data() + i * esize, 0, esize);
    }
  }
  return backend.divergence(box.data(), lp, main.data(), main.size());
}

}  // namespace ckptdoc
