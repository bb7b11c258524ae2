#pragma once
// Where DeepSpeed's reader hands a path to the weights-only reader (weights/weights_source.h), and the
// catalog it shows for such a source. Here rather than in weights/ because only Checkpoint::open asks, and
// telling a weights folder from a checkpoint takes DeepSpeed's own file-name and content rules.
#include <string>

#include "ckptdoc/sources/deepspeed/catalog.h"
#include "ckptdoc/weights/weights_source.h"

namespace ckptdoc::deepspeed::detail {

// Whether `path` is a weights source rather than a DeepSpeed checkpoint: a file that is not named like a
// DeepSpeed rank file or `latest`, or a folder with weights and no DeepSpeed `latest`, tag or rank files.
bool is_weights_path(const std::string& path);

// The catalog of a weights source opened as a checkpoint: kind "hf-folder" or "weights-file", its files, the
// tensor names as module keys, the main dtype as lp dtype, no optimizer and no groups, its problems.
Catalog catalog_of(const weights::WeightsSource& source);

}  // namespace ckptdoc::deepspeed::detail
