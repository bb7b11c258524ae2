#pragma once
// Why `repair --drop-optimizer` of an Accelerate save_state folder is refused, plain (optimizer.bin) or FSDP
// (optimizer_<i>/) alike: a user resumes with Accelerator.load_state, which loads the optimizer part for
// every prepared optimizer (accelerate 1.16 accelerator.py load_state: load_accelerator_state torch.loads
// optimizer.bin, load_fsdp_optimizer reads optimizer_<i>/ with DCP), so it fails on a folder without it
// (FileNotFoundError; CheckpointException "metadata is None"), and under FSDP2 prepare() takes a model only
// together with its optimizer. --reset-optimizer writes the part load_state reads with a fresh optimizer's
// state instead.
#include <string>

namespace ckptdoc::accelerate {

// The refusal (request_text marks) for a folder whose optimizer is `optimizer_part` ("optimizer.bin",
// "optimizer_0/"), read back by Accelerate's `loader` ("load_accelerator_state", "load_fsdp_optimizer").
std::string drop_refusal(const std::string& optimizer_part, const std::string& loader);

}  // namespace ckptdoc::accelerate
