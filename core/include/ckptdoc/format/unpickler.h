#pragma once
// A pickle reader for protocols 0-5 that never imports, calls or evaluates anything. It builds an inert
// Value tree; known torch/DeepSpeed/numpy reconstructors are interpreted into typed values, every other
// GLOBAL becomes a described Object. Hostile streams hit limits, not the stack or the heap.
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ckptdoc/format/value.h"

namespace ckptdoc {

struct UnpickleLimits {
  size_t max_depth = 256;                 // nesting of containers in the result
  size_t max_memo = 1u << 22;             // memo entries
  size_t max_stack = 1u << 22;            // values on the stack (all marks together)
  size_t max_marks = 4096;                // open MARKs
  uint64_t max_alloc_bytes = 1ull << 30;  // total bytes of strings/bytes/ints the stream may create
  size_t max_container_items = 1u << 26;  // items in all containers together
};

// What a stream imports and calls, recorded as the VM meets it (ckptdoc calls none of it; pickle_safety.h
// judges what a plain torch.load would do with it). Each distinct (record, module, callable, how) is kept
// once with a count.
enum class PickleUseKind : uint8_t { Global, Reduce, NewObj, NewObjEx, Inst, Obj, Build, PersistentId };
struct PickleUse {
  std::string record;     // UnpickleOptions::record_name
  std::string callable;   // "module.name" as the stream spells it, or "<result of module.name>" when computed
  bool computed = false;  // the callable is the result of another call, not a GLOBAL
  // The GLOBAL's module and name as the stream spells them (empty when computed). find_class imports the
  // module and looks the name up on it; a dotted name is an attribute walk (protocol 4 and later), so "torch"
  // / "os.system" reaches the os module's system although `callable` reads "torch.os.system".
  std::string module, name;
  PickleUseKind how = PickleUseKind::Global;
  std::string via;        // "copyreg._reconstructor" when a class is constructed through it
  std::string nested_in;  // "pickle.loads" when the use sits in pickled bytes handed to a loader
  std::string attribute_of, attribute;  // builtins.getattr(GLOBAL, 'name'): that GLOBAL and name
  uint64_t offset = 0;                  // first occurrence (offset in the record, or in the nested bytes)
  uint64_t count = 0;
};
class PickleUseLog {
 public:
  void add(PickleUse u);
  const std::vector<PickleUse>& uses() const { return uses_; }
  bool truncated() const { return truncated_; }  // more distinct uses than kept (max_distinct)

 private:
  static constexpr size_t kMaxDistinct = 4096;
  std::vector<PickleUse> uses_;
  // (record, module, callable, how, via, nested_in, attribute) joined by NULs: one hash per use, not a
  // six-string tuple compared down a tree (a stream makes one use per tensor).
  std::unordered_map<std::string, size_t> index_;
  bool truncated_ = false;
};

struct UnpickleOptions {
  UnpickleLimits limits;
  // Called for BINPERSID/PERSID with the persistent id value; returns what the id stands for (torch:
  // a Value::storage). When unset, persistent ids are refused. The callback gets its own copy of the id; what
  // it returns joins the VM's graph (containers the stream then discards are dismantled, so return leaf
  // values such as storages, or values the callback does not keep). The pid is freed (containers dismantled)
  // after the call: clone() what you keep.
  std::function<Value(const Value& pid)> persistent_load;
  std::string file_name;    // for error messages
  std::string record_name;  // e.g. "archive/data.pkl"
  // When set, every import and call the stream makes is recorded here as it is met, so a stream that is
  // refused half-way still tells what it reached.
  PickleUseLog* uses = nullptr;
};

struct UnpickleResult {
  Value value;
  uint64_t end_offset = 0;           // offset just past STOP
  int protocol = 0;                  // highest PROTO seen (0 when none)
  std::vector<std::string> globals;  // every "module.name" the stream named, in first-seen order
};

// Throws ckptdoc::Error with the file, record, offset and opcode on malformed or over-limit input.
UnpickleResult unpickle(std::span<const uint8_t> bytes, const UnpickleOptions& options = {});

}  // namespace ckptdoc
