#pragma once
// Errors raised by the value tree itself (storage, tensor, value accessors): they know no file, so the
// reader that owns the tree fills it in (Error::with_file).
#include <cstdint>
#include <string>

#include "ckptdoc/error.h"
#include "ckptdoc/format/value.h"

namespace ckptdoc::value_detail {

[[noreturn]] inline void fail(const std::string& what) {
  throw Error(ErrorKind::Corrupt, "", "", what);
}

[[noreturn]] inline void wrong_kind(const std::string& expected, const Value& v) {
  fail(expected_found(expected, v.type_name()));
}

inline bool mul_overflow(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

}  // namespace ckptdoc::value_detail
