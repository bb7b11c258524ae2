#pragma once
// Small text helpers shared by the CLI's subcommands.
#include <cstdint>
#include <cstdio>
#include <string>

#include "ckptdoc/human_bytes.h"

namespace ckptdoc::cli {

using ckptdoc::human_bytes;

// 1234567 -> "1,234,567" (built front to back: gcc 12 warns falsely about std::string::insert here).
inline std::string grouped(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace ckptdoc::cli
