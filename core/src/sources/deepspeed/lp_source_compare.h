#pragma once
// ZeRO-3 files hold no 16-bit weights: the fp32 partitions are the only copy a load restores, so by
// themselves they can be compared with nothing. Given 16-bit weights saved elsewhere
// (stage3_gather_16bit_weights_on_ model_save's file, a Hugging Face export, a Trainer folder's
// model.safetensors), each param's fp32 master, assembled from every rank, is compared with its weight there,
// and a stale or foreign save (or stale masters) is named. A part of deepspeed::diagnose.
#include <string>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"

namespace ckptdoc::deepspeed::detail {

// Fills lp_vs_fp32 of every param of `report` found in `lp_path` and adds the findings of the comparison:
// lp-source-mismatch (error), lp-source-incomplete (warning), lp-source-compared (info). `beside` says the
// file was found next to the checkpoint rather than passed with --lp-source. Throws ckptdoc::Error naming the
// file when it cannot be read.
void compare_with_lp_source(const Checkpoint& ckpt, const std::string& lp_path, bool beside,
                            analysis::Report& report);

}  // namespace ckptdoc::deepspeed::detail
