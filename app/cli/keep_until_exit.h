#pragma once
// What a read-only command (inspect, diagnose) opened is left to the process's exit instead of being freed
// field by field: a checkpoint of 20k small params holds a million unpickled values, and freeing them took
// ~8% of `inspect` (docs/benchmarks.md, "Diagnose of many small params"), work the exit does at once (the
// kernel drops the heap and the file mappings). The objects stay reachable from a static, so a leak checker
// reports nothing; nothing they own writes or removes anything on destruction.
#include <memory>
#include <vector>

namespace ckptdoc::cli {

inline void keep_until_exit(std::shared_ptr<const void> object) {
  static auto* const kept = new std::vector<std::shared_ptr<const void>>();  // never destroyed
  kept->push_back(std::move(object));
}

}  // namespace ckptdoc::cli
