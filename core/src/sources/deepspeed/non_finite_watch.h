#pragma once
// Internal to core: counts the NaN and Inf values of an export's float tensors while a writer pulls their
// bytes, so a file of non-finite weights is never written without saying so (and, strict, not written at
// all).
#include <memory>
#include <vector>

#include "ckptdoc/sources/deepspeed/export.h"

namespace ckptdoc::deepspeed::detail {

// What the watched tensors counted, one entry per tensor name (aliases of one storage count once).
struct NonFiniteTally {
  std::vector<NonFiniteTensor> tensors;
};

// The same tensors (names, shapes, shared storages) whose float storages count their non-finite values into
// `tally` as they are written. With `strict`, the first non-finite value throws ckptdoc::Error naming the
// tensor, which fails the write before anything is published. A tensor that is a view on part of a storage is
// counted up front instead (the export's own tensors are whole storages).
std::vector<NamedTensor> watch_non_finite(const std::vector<NamedTensor>& tensors,
                                          const std::shared_ptr<NonFiniteTally>& tally, bool strict);

}  // namespace ckptdoc::deepspeed::detail
