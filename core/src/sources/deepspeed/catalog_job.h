#pragma once
// What only a tensor/pipeline-parallel job's model-parallel ranks side by side show: tensor ranks of one
// stage whose params differ in name, shape or dtype, layer files present for some tensor ranks only, ranks
// that disagree on the optimizer or the data-parallel size.
#include <memory>
#include <vector>

#include "ckptdoc/sources/deepspeed/checkpoint.h"

namespace ckptdoc::deepspeed {

// `slices`: mp rank 0 first, then the others that could be opened. Appends to `out`.
void add_job_problems(const std::vector<std::shared_ptr<const Checkpoint>>& slices,
                      std::vector<Problem>& out);

}  // namespace ckptdoc::deepspeed
