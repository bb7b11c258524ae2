#pragma once
// `repair --drop-optimizer` of a DCP folder (one `.metadata`): a new folder without the optimizer's keys
// (`optimizer.*`, what get_state_dict's flattened optimizer state is saved as). `.metadata` is read into an
// inert tree (unpickler.h), its state_dict_metadata, storage_data and planner_data entries of those keys
// removed, every kept _StorageInfo's offset moved to where its item lies in the new storage file, and the
// tree written again with ckptdoc's pickler (pickler.h: the same torch classes, rebuilt the way pickle builds
// a dataclass). Each storage file keeps the kept items, whole and in their order (each item is a
// self-contained torch.save zip, so only the offsets change); a file left with none is not written. Every
// other file is copied.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::dcp {

struct DropCounts {
  size_t keys = 0;   // optimizer keys dropped
  size_t items = 0;  // storage items dropped
  size_t kept_keys = 0;
  uint64_t bytes_before = 0, bytes_after = 0;  // storage files, all together
};

// Writes the folder without the optimizer into `copy_dir` (an empty folder), then re-opens it and checks that
// its keys are the input's but the optimizer's and that every kept item's bytes are the input's. Throws
// ckptdoc::Error Unsupported naming the folder when it has no optimizer keys, per-rank metadata files
// (`__<rank>.metadata`) or .metadata fields it does not know; Inconsistent when the check fails.
// `progress` counts the storage files written and is checked for a cancel (Cancelled) between them.
// `replaced`: kept bytes items written with other bytes (key -> a torch.save zip), e.g. megatron-core 0.19's
// common state without its optimizer entries; the check then wants those bytes. Unsupported when a key is not
// a bytes item of the input.
DropCounts drop_optimizer(const Checkpoint& in, const std::string& copy_dir, Progress* progress = nullptr,
                          const std::map<std::string, std::vector<uint8_t>>& replaced = {});

}  // namespace ckptdoc::dcp
