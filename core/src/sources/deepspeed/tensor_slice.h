#pragma once
// A 1-D window on a flat partition tensor without touching its bytes.
#include <cstdint>

#include "ckptdoc/error.h"
#include "ckptdoc/format/value.h"

namespace ckptdoc::deepspeed::detail {

inline Tensor slice_1d(const Tensor& t, int64_t start, int64_t numel) {
  const int64_t stride = t.strides.empty() ? 1 : t.strides[0];
  if (start < 0 || numel < 0 || start + numel > t.numel()) {
    throw Error(ErrorKind::Inconsistent,
                t.storage ? (t.storage->file ? t.storage->file->path() : std::string()) : std::string(),
                "elements [" + std::to_string(start) + ", " + std::to_string(start + numel) + ")",
                expected_found("a range inside the flat partition", std::to_string(t.numel()) + " elements"));
  }
  Tensor s = t;
  s.shape = {numel};
  s.strides = {stride};
  s.storage_offset = t.storage_offset + start * stride;
  return s;
}

// A whole tensor as 1-D (a copy in memory when it is not contiguous): per-param state saved in the param's
// shape.
inline Tensor flat_view(const Tensor& t) {
  const int64_t numel = t.numel();
  if (!t.is_contiguous()) return Tensor::from_bytes(t.dtype, {numel}, t.to_bytes());
  Tensor flat = t;
  flat.shape = {numel};
  flat.strides = {1};
  return flat;
}

}  // namespace ckptdoc::deepspeed::detail
