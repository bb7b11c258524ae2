#pragma once
// Which copy of a param replicated across tensor ranks is right, as both diagnose (tp-replicated-mismatch)
// and export (--force over differing copies) decide it: the copies are sorted into classes of equal ones;
// with three or more copies a class holding more than half of them is right, otherwise (two copies, or no
// such class) nothing says which is, and tensor rank 0's class stands in.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace ckptdoc::deepspeed {

struct ReplicaVote {
  std::vector<size_t> class_of;    // per copy: its class (class 0 holds copy 0)
  std::vector<size_t> class_size;  // per class: how many copies it holds
  size_t reference = 0;            // the class taken as right
  bool majority = false;           // `reference` holds more than half of three or more copies
  size_t classes() const { return class_size.size(); }
};

// `same(i, j)`: copies i and j are equal. Each copy is compared with the first copy of each class so far.
template <class Same>
ReplicaVote vote_replicas(size_t copies, Same same) {
  ReplicaVote v;
  std::vector<size_t> first;  // per class: its first copy
  v.class_of.resize(copies);
  for (size_t i = 0; i < copies; ++i) {
    size_t c = 0;
    while (c < first.size() && !same(first[c], i)) ++c;
    if (c == first.size()) {
      first.push_back(i);
      v.class_size.push_back(0);
    }
    v.class_of[i] = c;
    ++v.class_size[c];
  }
  if (v.classes() <= 1) return v;
  const size_t largest =
      static_cast<size_t>(std::max_element(v.class_size.begin(), v.class_size.end()) - v.class_size.begin());
  v.majority = copies >= 3 && 2 * v.class_size[largest] > copies;
  v.reference = v.majority ? largest : 0;
  return v;
}

}  // namespace ckptdoc::deepspeed
