// repair --reset-optimizer of a bucket-space (dp_reshardable) Megatron-core save (see
// reset_bucket_optimizer.h).
#include "reset_bucket_optimizer.h"

#include <filesystem>
#include <set>
#include <vector>

#include "bucket_map.h"
#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/request_field.h"
#include "pickle_steps.h"
#include "repaired_copy.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::megatron {
namespace fs = std::filesystem;
namespace {

constexpr const char* kPrefix = "optimizer.distributed.";

bool ends(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The ShardedObject of a dp group's inner optimizer state dict: "...dp_group_idx_<i>.optimizer/shard_<...>".
bool is_param_groups_object(const std::string& key) {
  return key.find(".optimizer/shard_") != std::string::npos;
}

// Every param group dict under a "param_groups" list of `v`.
void param_groups(Value& v, std::vector<Value*>& out) {
  if (v.is_dict()) {
    for (auto& [k, item] : v.dict_mut().items) {
      if (k.is(Value::Kind::Str) && k.as_str() == "param_groups" && item.is_sequence()) {
        for (auto& g : item.items_mut()) out.push_back(&g);
      } else {
        param_groups(item, out);
      }
    }
  } else if (v.is_sequence()) {
    for (auto& item : v.items_mut()) param_groups(item, out);
  }
}

// A ShardedObject's steps: one float, the same in every param group.
struct Steps {
  size_t groups = 0;
  double value = 0;
};

Steps steps_of(Value& root, const std::string& where) {
  std::vector<Value*> groups;
  param_groups(root, groups);
  auto refuse = [&](const std::string& why) {
    return Error(
        ErrorKind::Unsupported, where, request_text("{reset_optimizer}"),
        why +
            ": megatron-core's DistributedOptimizer keeps a float `step` in every param group of its "
            "optimizer state dict; nothing was reset");
  };
  if (groups.empty()) throw refuse("holds no param groups");
  Steps s;
  for (Value* g : groups) {
    const Value* step = g->get("step");
    if (!step || !step->is(Value::Kind::Float)) throw refuse("a param group has no float step");
    if (s.groups && step->as_float() != s.value) throw refuse("its param groups' steps differ");
    s.value = step->as_float();
    ++s.groups;
  }
  return s;
}

void zero_steps(Value& root) {
  std::vector<Value*> groups;
  param_groups(root, groups);
  for (Value* g : groups) g->set("step", Value::real(0.0));
}

std::vector<uint8_t> record_bytes(const dcp::Checkpoint& in, const dcp::StorageRecord& record) {
  const auto file = in.file(record.item.file)->bytes();
  const auto at = static_cast<std::ptrdiff_t>(record.item.offset + record.entry.data_offset);
  return {file.begin() + at, file.begin() + at + static_cast<std::ptrdiff_t>(record.entry.size)};
}

}  // namespace

ResetResult reset_bucket_optimizer(const IterationFolder& folder, const dcp::Checkpoint& in,
                                   const std::string& out, Progress* progress) {
  std::vector<const dcp::Entry*> moments, objects;
  std::set<std::string> buckets;
  for (const auto& e : in.metadata().entries) {
    // A ChainedOptimizer's keys (a mixture-of-experts model's dense and expert optimizers) carry chained_<c>.
    const std::string key = e.key.substr(chained_prefix_length(e.key));
    if (key.rfind("optimizer.", 0) != 0) continue;
    const bool bucket = key.rfind(kPrefix, 0) == 0;
    const bool bucket_tensor = bucket && e.kind == dcp::EntryKind::Tensor;
    // kept as they are: the fp32 main params and the buckets' sizes
    const bool kept = (bucket_tensor && ends(key, ".param")) ||
                      (bucket && key.find(".per_bucket_numel") != std::string::npos);
    if (bucket_tensor && (ends(key, ".exp_avg") || ends(key, ".exp_avg_sq"))) {
      moments.push_back(&e);
      buckets.insert(e.key.substr(0, e.key.rfind('.')));
    } else if (bucket && !bucket_tensor && is_param_groups_object(key)) {
      objects.push_back(&e);
    } else if (!kept) {
      throw Error(
          ErrorKind::Unsupported, folder.dir, e.key,
          "is bucket-space optimizer state that is not Adam's moments, the fp32 main params, the param "
          "groups or the buckets' sizes: zero is not known to be that optimizer's fresh state, so "
          "nothing was reset");
    }
  }
  if (moments.empty())
    throw Error(
        ErrorKind::Unsupported, folder.dir, request_text("{reset_optimizer}"),
        "holds no Adam moments in bucket space (no optimizer.distributed.*.exp_avg / exp_avg_sq): nothing "
        "to reset");
  if (objects.empty())
    throw Error(
        ErrorKind::Unsupported, folder.dir, request_text("{reset_optimizer}"),
        "holds no optimizer.distributed.*.optimizer/shard_* param groups: the step megatron-core keeps "
        "there cannot be reset, so nothing was reset");

  ResetResult r;
  r.output = out;
  r.params = buckets.size();
  r.integrity_dropped = has_integrity(folder);
  const bool chained = chained_prefix_length(objects.front()->key) > 0;
  r.step_where =
      std::string(chained ? "chained_<c>." : "") + "optimizer.distributed.*.optimizer param_groups[*].step";
  write_repaired_copy(folder, out, CopyInput::Whole, progress, [&](const std::string& tmp_iter) {
    Progress none;
    Progress& p = progress ? *progress : none;
    p.set_stage("zeroing " + std::to_string(moments.size()) + " Adam moments", moments.size());
    for (const dcp::Entry* e : moments) {
      p.check();
      for (const auto& chunk : e->chunks) {
        if (!chunk.item)
          throw Error(ErrorKind::Inconsistent, folder.dir, e->key,
                      "a chunk has no storage item: nothing was reset");
        std::vector<dcp::StorageItem> items{*chunk.item};
        items.insert(items.end(), chunk.replicas.begin(), chunk.replicas.end());
        for (const auto& item : items) {
          const auto record = dcp::storage_record(in, item, e->key);
          dcp::write_record(record, std::vector<uint8_t>(record.entry.size, 0), tmp_iter);
          ++r.records;
        }
      }
      ++r.tensors;
      p.add(1);
    }
    std::vector<Value> expected;
    for (const dcp::Entry* e : objects) {
      if (!e->bytes_item) throw Error(ErrorKind::Inconsistent, folder.dir, e->key, "has no storage item");
      TorchFile tf = in.open_item(*e->bytes_item);
      const Steps s = steps_of(tf.root, folder.dir + "/" + e->bytes_item->file + " (" + e->key + ")");
      r.step_before = s.value;
      r.steps += s.groups;
      expected.push_back(tf.root.clone());
      zero_steps(expected.back());
      if (s.value == 0) continue;  // already a fresh optimizer's step
      const auto record = dcp::item_record(in, *e->bytes_item, e->key, "data.pkl");
      auto pkl = record_bytes(in, record);
      const auto at = step_floats(pkl, binfloat(s.value));
      if (at.size() != s.groups)
        throw Error(ErrorKind::Unsupported, folder.dir + "/" + e->bytes_item->file, e->key,
                    "the step " + std::to_string(s.value) + " is found after its key " +
                        std::to_string(at.size()) + " times in the pickle, not once per param group (" +
                        std::to_string(s.groups) + "): not rewritten, nothing was reset");
      const auto zero = binfloat(0.0);
      for (size_t p : at) std::copy(zero.begin(), zero.end(), pkl.begin() + static_cast<std::ptrdiff_t>(p));
      dcp::write_record(record, pkl, tmp_iter);
    }

    // The copy is checked before it is published: the moments read back as zeros, each param-groups object as
    // the input's with the step 0. The stage counts the bytes of the items re-read and stops at a cancel
    // between items (the partial folder is then removed).
    const auto copy = dcp::Checkpoint::open(tmp_iter);
    std::vector<const dcp::Entry*> copied;
    uint64_t bytes = 0;
    for (const dcp::Entry* e : moments) {
      const dcp::Entry* c = copy->metadata().find(e->key);
      if (!c) throw Error(ErrorKind::Inconsistent, tmp_iter, e->key, "missing from the copy");
      copied.push_back(c);
      for (const auto& chunk : c->chunks) bytes += chunk.item ? chunk.item->length : 0;
    }
    for (const dcp::Entry* e : objects) bytes += e->bytes_item->length;
    p.set_stage("checking the copy", bytes);
    for (const dcp::Entry* c : copied)
      for (const auto& chunk : c->chunks) {
        p.check();
        for (const float v : copy->read_chunk(*c, chunk).to_float())
          if (v != 0.0F)
            throw Error(ErrorKind::Inconsistent, tmp_iter, c->key,
                        "does not read back as zeros after the reset");
        p.add(chunk.item ? chunk.item->length : 0);
      }
    for (size_t i = 0; i < objects.size(); ++i) {
      p.check();
      const dcp::Entry* c = copy->metadata().find(objects[i]->key);
      if (!c || !c->bytes_item || !expected[i].equals(copy->open_item(*c->bytes_item).root))
        throw Error(
            ErrorKind::Inconsistent, tmp_iter, objects[i]->key,
            "is not the input's param groups with the step 0 after the rewrite: nothing was published");
      p.add(objects[i]->bytes_item->length);
    }
  });
  r.iteration_dir = repaired_iteration_dir(folder, out);
  return r;
}

}  // namespace ckptdoc::megatron
