#pragma once
// Writes a Value tree as a protocol-2 pickle using only the opcodes torch's weights_only loader accepts.
// Tensors become torch._utils._rebuild_tensor_v2 calls with persistent storage ids; the caller decides
// each storage's key.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/format/value.h"

namespace ckptdoc {

struct PickleOptions {
  // Returns the record key of a storage (called once per tensor). Required when the tree holds tensors.
  std::function<std::string(const std::shared_ptr<Storage>&)> storage_key;
  // Legacy (non-zip) torch streams use 6-tuple persistent ids with a trailing None.
  bool legacy_persistent_ids = false;
};

std::vector<uint8_t> pickle(const Value& root, const PickleOptions& options = {});

}  // namespace ckptdoc
