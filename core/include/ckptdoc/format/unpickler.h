#pragma once
// A pickle reader for protocols 0-5 that never imports, calls or evaluates anything. It builds an inert
// Value tree; known torch/DeepSpeed/numpy reconstructors are interpreted into typed values, every other
// GLOBAL becomes a described Object. Hostile streams hit limits, not the stack or the heap.
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "ckptdoc/format/value.h"

namespace ckptdoc {

struct UnpickleLimits {
  size_t max_depth = 256;              // nesting of containers in the result
  size_t max_memo = 1u << 22;          // memo entries
  size_t max_stack = 1u << 22;         // values on the stack (all marks together)
  size_t max_marks = 4096;             // open MARKs
  uint64_t max_alloc_bytes = 1ull << 30;  // total bytes of strings/bytes/ints the stream may create
  size_t max_container_items = 1u << 26;  // items in all containers together
};

struct UnpickleOptions {
  UnpickleLimits limits;
  // Called for BINPERSID/PERSID with the persistent id value; returns what the id stands for (torch:
  // a Value::storage). When unset, persistent ids are refused. The callback gets its own copy of the id; what it
  // returns joins the VM's graph (containers the stream then discards are dismantled, so return leaf values
  // such as storages, or values the callback does not keep).
  // The pid is freed (containers dismantled) after the call: clone() what you keep.
  std::function<Value(const Value& pid)> persistent_load;
  std::string file_name;  // for error messages
  std::string record_name;  // e.g. "archive/data.pkl"
};

struct UnpickleResult {
  Value value;
  uint64_t end_offset = 0;  // offset just past STOP
  int protocol = 0;         // highest PROTO seen (0 when none)
  std::vector<std::string> globals;  // every "module.name" the stream named, in first-seen order
};

// Throws ckptdoc::Error with the file, record, offset and opcode on malformed or over-limit input.
UnpickleResult unpickle(std::span<const uint8_t> bytes, const UnpickleOptions& options = {});

}  // namespace ckptdoc
