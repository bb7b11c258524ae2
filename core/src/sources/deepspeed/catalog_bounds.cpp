// Checked counts and sizes from checkpoint files (catalog_bounds.h).
#include "sources/deepspeed/catalog_bounds.h"

#include "ckptdoc/error.h"

namespace ckptdoc::deepspeed::detail {

int checked_count(std::optional<int64_t> v, int absent, int64_t max, const std::string& file,
                  const std::string& field) {
  if (!v) return absent;
  if (*v < 0 || *v > max)
    throw Error(ErrorKind::Corrupt, file, field,
                "claims " + std::to_string(*v) + "; ckptdoc accepts 0 to " + std::to_string(max) +
                    " (the file is damaged or was not written by DeepSpeed)");
  return static_cast<int>(*v);
}

int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& file, const std::string& where) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(ErrorKind::Corrupt, file, where, "shape has a negative dimension " + std::to_string(d));
    if (d != 0 && n > kMaxParamNumel / d)
      throw Error(ErrorKind::Corrupt, file, where,
                  "shape claims more than " + std::to_string(kMaxParamNumel) + " elements");
    n *= d;
  }
  return n;
}

}  // namespace ckptdoc::deepspeed::detail
