// --reset-optimizer of a DCP folder's Adam state (see reset_optimizer.h).
#include "sources/dcp/reset_optimizer.h"

#include <set>
#include <utility>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/dcp/diagnose.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::dcp {
namespace {

// The fields torch's Adam and AdamW keep per param (torch/optim/adam.py, _init_group); a fresh optimizer
// holds them as zeros (max_exp_avg_sq with amsgrad only).
constexpr const char* kAdamFields[] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"};

// The Adam field `key` holds ("exp_avg" ...), its param in `param`; empty for a key outside optimizer.state.
std::string adam_field(const std::string& key, std::string& param) {
  for (const char* f : kAdamFields)
    if (auto p = optimizer_state_param(key, f); !p.empty()) {
      param = p;
      return f;
    }
  return {};
}

bool is_optimizer_state(const std::string& key) {
  return key.rfind("optimizer.state.", 0) == 0 || key.rfind("state.", 0) == 0;
}

}  // namespace

ResetCounts reset_adam_state(const Checkpoint& in, const std::string& copy_dir, Progress* progress) {
  const std::string& dir = in.dir();
  std::vector<const Entry*> reset;
  std::set<std::string> params, with_moments;
  for (const auto& e : in.metadata().entries) {
    if (!is_optimizer_state(e.key)) continue;
    std::string param;
    const std::string field = adam_field(e.key, param);
    if (field.empty())
      throw Error(
          ErrorKind::Unsupported, dir, e.key,
          "is optimizer state that is not Adam's (exp_avg, exp_avg_sq, max_exp_avg_sq, step): zero is "
          "not known to be that optimizer's fresh state, so nothing was reset. Load the weights with a "
          "fresh optimizer instead");
    if (e.kind != EntryKind::Tensor)
      throw Error(ErrorKind::Unsupported, dir, e.key,
                  "is stored as a pickled object, not a tensor: it is not rewritten in place, so nothing was "
                  "reset. Load the weights with a fresh optimizer instead");
    if (field != "step") with_moments.insert(param);
    params.insert(param);
    reset.push_back(&e);
  }
  if (with_moments.empty())
    throw Error(ErrorKind::Unsupported, dir, request_text("{reset_optimizer}"),
                "holds no Adam moments (no optimizer.state.<param>.exp_avg / exp_avg_sq tensors): nothing to "
                "reset");
  ResetCounts n;
  Progress none;
  Progress& p = progress ? *progress : none;
  p.set_stage("zeroing " + std::to_string(reset.size()) + " Adam tensors", reset.size());
  for (const Entry* e : reset) {
    for (const auto& chunk : e->chunks) {
      if (!chunk.item)
        throw Error(ErrorKind::Inconsistent, dir, e->key, "a chunk has no storage item: nothing was reset");
      std::vector<StorageItem> items{*chunk.item};
      items.insert(items.end(), chunk.replicas.begin(), chunk.replicas.end());
      for (const auto& item : items) {
        p.check();
        const auto record = storage_record(in, item, e->key);
        // The whole storage is zeroed (all of it is this chunk's: DCP saves one tensor per item), which reads
        // as 0 in every float and integer dtype.
        write_record(record, std::vector<uint8_t>(record.entry.size, 0), copy_dir);
        ++n.records;
      }
    }
    ++n.tensors;
    p.add(1);
  }
  n.params = params.size();
  // The copy is checked before it is published: every reset tensor reads back whole, as zeros. The stage
  // counts the bytes of the items re-read and stops at a cancel between items (the partial folder is then
  // removed).
  const auto copy = Checkpoint::open(copy_dir);
  std::vector<std::pair<const Entry*, Chunk>> items;
  uint64_t bytes = 0;
  for (const Entry* e : reset) {
    const Entry* c = copy->metadata().find(e->key);
    if (!c) throw Error(ErrorKind::Inconsistent, copy_dir, e->key, "missing from the copy");
    for (const auto& chunk : c->chunks) {
      std::vector<StorageItem> all{*chunk.item};
      all.insert(all.end(), chunk.replicas.begin(), chunk.replicas.end());
      for (const auto& item : all) {
        Chunk one = chunk;
        one.item = item;
        items.emplace_back(c, std::move(one));
        bytes += item.length;
      }
    }
  }
  p.set_stage("checking the copy", bytes);
  for (const auto& [c, one] : items) {
    p.check();
    for (const float v : copy->read_chunk(*c, one).to_float())
      if (v != 0.0F)
        throw Error(ErrorKind::Inconsistent, copy_dir + "/" + one.item->file, c->key,
                    "does not read back as zeros after the reset");
    p.add(one.item->length);
  }
  return n;
}

}  // namespace ckptdoc::dcp
