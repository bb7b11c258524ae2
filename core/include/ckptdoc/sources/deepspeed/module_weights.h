#pragma once
// The module's weights as a DeepSpeed model file saves them (its `module` state dict): what a diagnosis reads
// of a checkpoint that has no flat group (sources/deepspeed/module_weights_scan.cpp), read here, where
// DeepSpeed's file names and layout are known, so the analysis needs only the neutral catalog.
#include <string>
#include <utility>
#include <vector>

#include "ckptdoc/sources/deepspeed/checkpoint.h"

namespace ckptdoc::deepspeed {

struct ModuleWeights {
  std::string file;                                     // the model file, relative to the tag folder
  std::vector<std::pair<std::string, Tensor>> tensors;  // its module's tensor entries, in file order
};

// Whether the catalog lists the model file of this mp rank (dp rank 0's). Reads nothing.
bool has_module_weights_file(const Checkpoint& ckpt);

// That file's module entries that are tensors (an entry that is not, none in DeepSpeed's own modules, is not
// a weight). Throws ckptdoc::Error naming the file when it is not listed or cannot be read.
ModuleWeights module_weights(const Checkpoint& ckpt);

}  // namespace ckptdoc::deepspeed
