#pragma once
// A weights source as JSON (ckptdoc inspect --json): kind, root, index, files with their tensors' bytes,
// every tensor (name, dtype, shape, file) and the problems.
#include <string>

#include "ckptdoc/weights/weights_source.h"

namespace ckptdoc::weights {

std::string weights_to_json(const WeightsSource& source, int indent = 2);

}  // namespace ckptdoc::weights
