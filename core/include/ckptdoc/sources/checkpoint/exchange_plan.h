#pragma once
// Which slices of which old partitions make up each new partition when a checkpoint is re-partitioned: the
// plan a distributed re-partition follows to send every slice from the process that holds the old rank
// file to the process that writes the new one. Pure functions of the two layouts; no file is read. The
// partitions follow DeepSpeed's ZeRO rules, so this lives with DeepSpeed's source (namespace repair, as the
// distributed re-partition that uses it).
#include <cstdint>
#include <string>
#include <vector>

#include "ckptdoc/model/flat_layout.h"

namespace ckptdoc::repair {

// Elements [first, first + len) of a flattened param, stored in `rank`'s partition at element `offset`.
struct Holding {
  int rank = 0;
  int64_t first = 0, len = 0, offset = 0;
};
// Where a param's elements live in a flat group (ZeRO-1/2, BF16: rank r holds flat elements
// [r*P, (r+1)*P)) or a ZeRO-3 sub-group (rank r holds elements [r*ceil(n/dp), ...) of every param), in
// element order. dp is the group's partition count; ZeRO-3 padding past the param's end is not listed.
std::vector<Holding> param_holdings(const model::GroupLayout& g, const model::ParamEntry& p, bool zero3);

// A run of elements of one param that sits in one old rank's partition and lands in one new rank's
// partition of `new_group` at element `new_offset`.
struct Piece {
  std::string param;
  int64_t first = 0, len = 0;
  int old_rank = 0, new_rank = 0, new_group = 0;
  int64_t new_offset = 0;
};

// Every piece of every new group, split to at most `max_len` elements, ordered by new group, new rank and
// new offset. Every param of `new_groups` must be in `old_groups` with the same numel; elements of a new
// partition that no piece covers are padding (zeros).
std::vector<Piece> exchange_pieces(const std::vector<model::GroupLayout>& old_groups,
                                   const std::vector<model::GroupLayout>& new_groups, bool zero3,
                                   int64_t max_len);

}  // namespace ckptdoc::repair
