#pragma once
// Small text helpers shared by the CLI's subcommands.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ckptdoc/human_bytes.h"

namespace ckptdoc::cli {

using ckptdoc::grouped;
using ckptdoc::human_bytes;

// `prefix` + `name` in exactly `width` columns for a table. A long name loses its start to an ellipsis, the
// part that repeats from row to row ("model.layers."), while the prefix (a slice label like "[tp 1] ") is
// kept whole. Padded by characters, not bytes, so that the ellipsis (3 bytes) does not shift the columns
// after it.
inline std::string fit_column(const std::string& prefix, const std::string& name, size_t width) {
  auto columns = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
    return n;
  };
  std::string out = prefix + name;
  if (columns(out) > width) {
    const std::string keep_prefix = columns(prefix) + 9 <= width ? prefix : std::string();
    const std::string whole = keep_prefix.empty() ? out : name;
    size_t start = whole.size();
    for (size_t kept = 0; start > 0 && kept + 1 < width - columns(keep_prefix);) {
      --start;
      if ((static_cast<unsigned char>(whole[start]) & 0xC0) != 0x80) ++kept;
    }
    out = keep_prefix + "…" + whole.substr(start);
  }
  return out + std::string(width - std::min(width, columns(out)), ' ');
}

}  // namespace ckptdoc::cli
