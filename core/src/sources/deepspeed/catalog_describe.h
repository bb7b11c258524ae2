#pragma once
// Where a DeepSpeed-family catalog says, in the neutral model's terms (model/catalog.h), what the front ends
// print and decide on: its capabilities (convert, compare with 16-bit weights elsewhere), the optimizer and
// partitioning texts, the files' count and bytes, the facts only DeepSpeed records (its version) and the
// rules only its records judge (deepspeed_rules.h). Run
// once per catalog, when Checkpoint::open has finished it, so no view reads a DeepSpeed-only field.
#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::deepspeed::detail {

void describe_for_front_ends(Catalog& catalog);

}  // namespace ckptdoc::deepspeed::detail
