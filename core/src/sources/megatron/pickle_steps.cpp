// Step floats in a torch.save pickle (see pickle_steps.h).
#include "pickle_steps.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ckptdoc::megatron {

std::vector<uint8_t> binfloat(double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, 8);
  std::vector<uint8_t> out{'G'};
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  return out;
}

std::vector<size_t> step_floats(const std::vector<uint8_t>& pkl, const std::vector<uint8_t>& value) {
  static const std::string key = std::string("X\x04\x00\x00\x00step", 9);
  auto at = [&](size_t p, const uint8_t* bytes, size_t n) {
    return p + n <= pkl.size() && std::equal(bytes, bytes + n, pkl.begin() + static_cast<std::ptrdiff_t>(p));
  };
  auto value_at = [&](size_t p) { return at(p, value.data(), value.size()); };
  std::vector<size_t> out;
  std::vector<uint8_t> get;  // the memo get of the key, once its put is seen
  for (size_t p = 0; p + key.size() < pkl.size(); ++p) {
    if (!get.empty() && at(p, get.data(), get.size()) && value_at(p + get.size())) {
      out.push_back(p + get.size());
      continue;
    }
    if (!at(p, reinterpret_cast<const uint8_t*>(key.data()), key.size())) continue;
    size_t q = p + key.size();
    if (pkl[q] == 'q' && q + 1 < pkl.size()) {
      get = {'h', pkl[q + 1]};
      q += 2;
    } else if (pkl[q] == 'r' && q + 4 < pkl.size()) {
      get = {'j', pkl[q + 1], pkl[q + 2], pkl[q + 3], pkl[q + 4]};
      q += 5;
    }
    if (value_at(q)) out.push_back(q);
  }
  return out;
}

}  // namespace ckptdoc::megatron
