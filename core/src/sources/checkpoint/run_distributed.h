#pragma once
// run_repair under mpirun with several processes (RepairRequest::across_processes).
#include <string>

#include "ckptdoc/sources/checkpoint/repair.h"

namespace ckptdoc::repair::detail {

// Every process calls this; each failure is agreed so that all processes stop together and leave nothing
// behind.
RepairResult run_repair_across_processes(const deepspeed::Checkpoint& ckpt, const std::string& output,
                                         const RepairRequest& rq, Progress* progress, FileIo& io);

}  // namespace ckptdoc::repair::detail
