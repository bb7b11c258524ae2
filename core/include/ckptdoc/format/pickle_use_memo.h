#pragma once
// TorchFile::pickle_uses_of over files that often hold the same pickle: a job's per-rank files (DeepSpeed's
// ZeRO-3 model-states files differ in their names, most in nothing else).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ckptdoc/format/unpickler.h"
#include "ckptdoc/io/mapped_file.h"

namespace ckptdoc {

// A zip whose data.pkl is byte-identical to one read before gets that one's uses under its own record name,
// unpickled once; any other file is read as pickle_uses_of reads it. Not thread-safe.
class PickleUseMemo {
 public:
  std::vector<PickleUse> uses_of(const std::string& path);

 private:
  struct Seen {
    size_t hash = 0;
    std::shared_ptr<const MappedFile> file;  // keeps `pickle` mapped
    std::span<const uint8_t> pickle;
    std::string record;
    std::vector<PickleUse> uses;
  };
  std::vector<Seen> seen_;
};

}  // namespace ckptdoc
