#pragma once
// Counts and sizes a checkpoint's files claim (world sizes, partition counts, param shapes) drive loops and
// allocations: each is checked against what ckptdoc can lay out before it is used, and a corrupted one is a
// ckptdoc::Error naming the file and the field (in microseconds: nothing is allocated for it first).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ckptdoc::deepspeed::detail {

// Largest element count of one param, and of all params of one flat group, ckptdoc accepts (2^50 and 2^53:
// far beyond any model, small enough that offsets and paddings never overflow int64).
inline constexpr int64_t kMaxParamNumel = int64_t{1} << 50;
inline constexpr int64_t kMaxGroupNumel = int64_t{1} << 53;

// `v` (absent: `absent`) when 0 <= v <= max, else throws Error(file, field, "claims v ...").
int checked_count(std::optional<int64_t> v, int absent, int64_t max, const std::string& file,
                  const std::string& field);

// The element count of a shape: every dimension >= 0, the product at most kMaxParamNumel.
int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& file, const std::string& where);

}  // namespace ckptdoc::deepspeed::detail
