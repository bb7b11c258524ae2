#pragma once
// `repair --refresh-fp32` of a Megatron-core save: a copy of the iteration folder (and the tracker, when the
// save folder was named) whose fp32 main params (main_params.h's layouts) are the exact upcast of their
// bf16/fp16 weights. Every other byte is the input's: each main chunk is a whole torch.save zip inside a
// `.distcp`, float32 as before, so only its storage record and that record's CRC-32 (data descriptor and
// central directory) change, and
// `.metadata` with every offset stays valid. The input is never written.
#include <cstdint>
#include <string>
#include <vector>

#include "ckptdoc/task/progress.h"
#include "megatron_folder.h"

namespace ckptdoc::megatron {

struct RefreshResult {
  std::string output;  // the folder written
  std::string
      iteration_dir;   // the iteration folder inside it (== output when the iteration folder was named)
  size_t params = 0;   // mains refreshed
  size_t chunks = 0;   // storage items rewritten
  std::string prefix;  // "optimizer.state.fp32_param." ...
  std::vector<std::string> absent_moments;  // the save has no exp_avg/exp_avg_sq for these keys
  bool integrity_dropped = false;           // the input had integrity.json; the copy has none
  bool bucket_space = false;                // optimizer.distributed.*.param slices (refresh_bucket_mains.h)
  int64_t gap_elements = 0;                 // bucket space: the 64-alignment gaps' elements, left as stored
};

// A save in bucket space (optimizer.distributed.*, no model-space mains) is refreshed by
// refresh_bucket_mains.h, with its refusals. Throws ckptdoc::Error: InvalidRequest (output exists, or inside
// the input), Unsupported (no mains to refresh, a chunk that is not a plain contiguous float32 record, a
// ZIP64 item), and the read errors of the checkpoint. Verifies the copy before publishing it: every main must
// then be the exact upcast of its weight. `progress` counts the copy's bytes, then the params refreshed, and
// is checked for a cancel (Cancelled) between steps: nothing is then published.
RefreshResult refresh_main_params(const std::string& path, const std::string& output,
                                  Progress* progress = nullptr);

}  // namespace ckptdoc::megatron
