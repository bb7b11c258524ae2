// repair --reset-optimizer of a Megatron-core save (see reset_optimizer.h).
#include "reset_optimizer.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>
#include <vector>

#include "bucket_map.h"
#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "megatron_folder.h"
#include "pickle_steps.h"
#include "repaired_copy.h"
#include "reset_bucket_optimizer.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::megatron {
namespace fs = std::filesystem;
namespace {

constexpr const char* kMoments[] = {"optimizer.state.exp_avg.", "optimizer.state.exp_avg_sq."};
// What megatron-core's model-space layouts keep beside the moments: the fp32 main params (kept as they are).
constexpr const char* kMains[] = {"optimizer.state.fp32_param.", "optimizer.state.param."};

bool starts(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// A chunk's item and its replicas (per-rank saves), each read and written the same way.
std::vector<dcp::StorageItem> all_items(const dcp::Chunk& chunk, const std::string& dir,
                                        const std::string& key) {
  if (!chunk.item)
    throw Error(ErrorKind::Inconsistent, dir, key, "a chunk has no storage item: nothing was reset");
  std::vector<dcp::StorageItem> items{*chunk.item};
  items.insert(items.end(), chunk.replicas.begin(), chunk.replicas.end());
  return items;
}
dcp::Chunk one_item(const dcp::Chunk& chunk, const dcp::StorageItem& item) {
  dcp::Chunk one = chunk;
  one.item = item;
  return one;
}

// Where common.pt keeps the optimizer step, as megatron-core writes it.
struct CommonStep {
  std::string record;  // the common_step tensor's record ("data/<key>" in the archive), or empty (floats)
  size_t groups = 0;   // param groups holding a float step
  double value = 0;
};

Value* inner_optimizer(Value& root) {
  Value* opt = root.get_mut("optimizer");
  return opt ? opt->get_mut("optimizer") : nullptr;
}

// Sets the step in the tree `root` (the expected copy: a clone of the input's tree) to 0.
void zero_step_in_tree(Value& root) {
  Value* inner = inner_optimizer(root);
  if (Value* state = inner->get_mut("state"); state && state->get("common_step")) {
    const Tensor& t = state->get("common_step")->as_tensor();
    Tensor zero;
    zero.dtype = t.dtype;
    zero.shape = t.shape;
    zero.strides = t.strides;
    zero.storage = Storage::from_bytes(t.dtype, std::vector<uint8_t>(t.storage->nbytes(), 0), t.storage->key);
    state->set("common_step", Value::tensor(std::move(zero)));
    return;
  }
  for (auto& g : inner->get_mut("param_groups")->items_mut()) g.set("step", Value::real(0.0));
}

CommonStep find_step(const Value& root, const std::string& where) {
  auto refuse = [&](const std::string& why) {
    return Error(ErrorKind::Unsupported, where, request_text("{reset_optimizer}"),
                 why +
                     ": megatron-core keeps its optimizer step as optimizer.optimizer.state.common_step (a "
                     "0-d float tensor) or as a float `step` in every optimizer.optimizer.param_groups "
                     "entry; nothing was reset");
  };
  const Value* opt = root.get("optimizer");
  const Value* inner = opt ? opt->get("optimizer") : nullptr;
  if (!inner || !inner->is_dict()) throw refuse("holds no optimizer.optimizer dict");
  CommonStep s;
  if (const Value* state = inner->get("state"); state && state->get("common_step")) {
    const Value& v = *state->get("common_step");
    if (!v.is_tensor() || v.as_tensor().dtype != DType::F32 || v.as_tensor().numel() != 1 ||
        v.as_tensor().storage->nbytes() != 4)
      throw refuse("its common_step is not a one-element float32 tensor");
    s.record = "data/" + v.as_tensor().storage->key;
    s.value = v.as_tensor().to_float().at(0);
    return s;
  }
  const Value* groups = inner->get("param_groups");
  if (!groups || !groups->is_sequence() || groups->items().empty()) throw refuse("holds no param groups");
  for (const auto& g : groups->items()) {
    const Value* step = g.get("step");
    if (!step || !step->is(Value::Kind::Float)) throw refuse("a param group has no float step");
    if (s.groups && step->as_float() != s.value) throw refuse("its param groups' steps differ");
    s.value = step->as_float();
    ++s.groups;
  }
  return s;
}

// The common state as the save keeps it: common.pt (the state itself), or megatron-core 0.19's DCP bytes item
// common_state/shard_0_1 (a torch.save of [state], inside a .distcp file). Its records are found and
// rewritten the same way in both: a record of the same length, so the item's offsets (and .metadata) stay the
// input's.
struct CommonFile {
  const dcp::Checkpoint* ckpt = nullptr;
  const dcp::Entry* item = nullptr;  // the DCP item, or null for common.pt
  std::string dir;                   // the iteration folder
  std::string where;                 // "common.pt" or "common_state/shard_0_1 (__0_0.distcp)"
  std::string file = "common.pt";    // the file holding it, relative to the iteration folder
  TorchFile tf;

  const Value& state() const { return item ? tf.root.items().front() : tf.root; }
  dcp::StorageRecord record(const std::string& name) const {
    return item ? dcp::item_record(*ckpt, *item->bytes_item, item->key, name)
                : dcp::file_record(dir, "common.pt", tf.archive_name + "/" + name);
  }
  std::vector<uint8_t> bytes(const dcp::StorageRecord& r) const {
    const auto file = MappedFile::open(dir + "/" + r.item.file);
    const auto all = file->bytes();
    const auto at = static_cast<std::ptrdiff_t>(r.item.offset + r.entry.data_offset);
    return {all.begin() + at, all.begin() + at + static_cast<std::ptrdiff_t>(r.entry.size)};
  }
  // The copy's common state (its root: the state, or the list holding it).
  Value copy_root(const std::string& copy_dir) const {
    if (!item) return TorchFile::open(copy_dir + "/common.pt").root;
    const auto copy = dcp::Checkpoint::open(copy_dir);
    const dcp::Entry* e = copy->metadata().find(item->key);
    if (!e || !e->bytes_item)
      throw Error(ErrorKind::Inconsistent, copy_dir, item->key, "missing from the copy");
    return copy->open_item(*e->bytes_item).root;
  }
};

CommonFile open_common(const IterationFolder& folder, const dcp::Checkpoint& in) {
  CommonFile c;
  c.ckpt = &in;
  c.dir = folder.dir;
  const std::string common_path = folder.dir + "/common.pt";
  if (fs::exists(common_path)) {
    c.where = "common.pt";
    c.tf = TorchFile::open(common_path);
    return c;
  }
  const CommonState state = read_common(folder.dir, in);
  if (!state.in_checkpoint)
    throw Error(ErrorKind::Unsupported, common_path, request_text("{reset_optimizer}"),
                "is absent: the optimizer step megatron-core keeps there cannot be reset");
  if (!state.error.empty())
    throw Error(ErrorKind::Unsupported, folder.dir, state.key,
                "cannot be read (" + state.error + "): the optimizer step it keeps cannot be reset");
  c.item = in.metadata().find(state.key);
  c.file = c.item->bytes_item->file;
  c.where = state.key + " (" + c.file + ")";
  c.tf = in.open_item(*c.item->bytes_item);
  return c;
}

// Rewrites the common state in `copy_dir` so the step reads 0: the common_step tensor's storage record
// zeroed, or each param group's BINFLOAT step in the pickle given 0.0's 8 bytes (the pickle's length and
// every other byte stay). The floats are found after their key, one per param group (step_floats); the
// caller's check of the whole tree then proves that exactly the steps changed.
void write_zero_step(const CommonStep& s, const CommonFile& common, const std::string& copy_dir) {
  if (s.value == 0) return;  // already a fresh optimizer's step
  if (!s.record.empty()) {
    const auto record = common.record(s.record);
    dcp::write_record(record, std::vector<uint8_t>(record.entry.size, 0), copy_dir);
    return;
  }
  const auto record = common.record("data.pkl");
  auto pkl = common.bytes(record);
  const auto to = binfloat(0.0);
  const auto at = step_floats(pkl, binfloat(s.value));
  if (at.size() != s.groups)
    throw Error(ErrorKind::Unsupported, common.dir + "/" + record.where, record.entry.name,
                "the step " + std::to_string(s.value) + " is found after its key " +
                    std::to_string(at.size()) + " times in the pickle, not once per param group (" +
                    std::to_string(s.groups) + "): not rewritten, nothing was reset");
  for (size_t p : at) std::copy(to.begin(), to.end(), pkl.begin() + static_cast<std::ptrdiff_t>(p));
  dcp::write_record(record, pkl, copy_dir);
}

}  // namespace

ResetResult reset_optimizer(const std::string& path, const std::string& output, Progress* progress) {
  const auto folder = resolve(path);
  const std::string out = dcp::checked_new_output(output, {path, folder.dir});
  const auto in = dcp::Checkpoint::open(folder.dir);

  std::vector<const dcp::Entry*> moments;
  std::set<std::string> params;
  for (const auto& e : in->metadata().entries) {
    // bucket space, a ChainedOptimizer's (chained_<c>.: a mixture-of-experts model's) included: its own
    // layout
    if (is_bucket_space_key(e.key)) return reset_bucket_optimizer(folder, *in, out, progress);
    if (!starts(e.key, "optimizer.")) continue;
    bool moment = false, main = false;
    for (const char* m : kMoments)
      if (starts(e.key, m)) {
        moment = true;
        params.insert(e.key.substr(std::strlen(m)));
      }
    for (const char* m : kMains) main = main || starts(e.key, m);
    if (!moment && !main)
      throw Error(ErrorKind::Unsupported, folder.dir, e.key,
                  "is optimizer state that is not Adam's moments or the fp32 main params: zero is not known "
                  "to be that optimizer's fresh state, so nothing was reset");
    if (moment && e.kind != dcp::EntryKind::Tensor)
      throw Error(ErrorKind::Unsupported, folder.dir, e.key, "is not a tensor: nothing was reset");
    if (moment) moments.push_back(&e);
  }
  if (moments.empty())
    throw Error(
        ErrorKind::Unsupported, folder.dir, request_text("{reset_optimizer}"),
        "holds no Adam moments (no optimizer.state.exp_avg.<key> / exp_avg_sq.<key>): nothing to reset");
  const CommonFile common = open_common(folder, *in);
  const CommonStep step = find_step(common.state(), folder.dir + "/" + common.where);

  ResetResult r;
  r.output = out;
  r.step_before = step.value;
  r.integrity_dropped = has_integrity(folder);
  r.steps = step.record.empty() ? step.groups : 1;
  r.common_where = common.where;
  r.step_where = step.record.empty() ? "optimizer.optimizer.param_groups[*].step"
                                     : "optimizer.optimizer.state.common_step";
  write_repaired_copy(folder, out, CopyInput::Whole, progress, [&](const std::string& tmp_iter) {
    Progress none;
    Progress& p = progress ? *progress : none;
    p.set_stage("zeroing " + std::to_string(moments.size()) + " Adam moments", moments.size());
    for (const dcp::Entry* e : moments) {
      for (const auto& chunk : e->chunks) {
        for (const auto& item : all_items(chunk, folder.dir, e->key)) {
          p.check();
          const auto record = dcp::storage_record(*in, item, e->key);
          write_record(record, std::vector<uint8_t>(record.entry.size, 0), tmp_iter);
          ++r.records;
        }
      }
      ++r.tensors;
      p.add(1);
    }
    write_zero_step(step, common, tmp_iter);

    // The copy is checked before it is published: the moments read back as zeros, and common.pt is the
    // input's tree with the step 0, nothing else changed. The stage counts the moments' bytes re-read and
    // stops at a cancel between items (the partial folder is then removed).
    const auto copy = dcp::Checkpoint::open(tmp_iter);
    std::vector<std::pair<const dcp::Entry*, dcp::Chunk>> items;
    uint64_t bytes = 0;
    for (const dcp::Entry* e : moments) {
      const dcp::Entry* c = copy->metadata().find(e->key);
      if (!c) throw Error(ErrorKind::Inconsistent, tmp_iter, e->key, "missing from the copy");
      for (const auto& chunk : c->chunks)
        for (const auto& item : all_items(chunk, tmp_iter, e->key)) {
          items.emplace_back(c, one_item(chunk, item));
          bytes += item.length;
        }
    }
    p.set_stage("checking the copy", bytes);
    for (const auto& [c, one] : items) {
      p.check();
      for (const float v : copy->read_chunk(*c, one).to_float())
        if (v != 0.0F)
          throw Error(ErrorKind::Inconsistent, tmp_iter, c->key,
                      "does not read back as zeros after the reset");
      p.add(one.item->length);
    }
    p.check();
    Value expected = common.tf.root.clone();
    zero_step_in_tree(common.item ? expected.items_mut().front() : expected);
    if (!expected.equals(common.copy_root(tmp_iter)))
      throw Error(ErrorKind::Inconsistent, tmp_iter + "/" + common.file,
                  common.item ? common.item->key : request_text("{reset_optimizer}"),
                  "is not the input's common state with the step 0 after the rewrite: nothing was published");
  });
  r.params = params.size();
  r.iteration_dir = repaired_iteration_dir(folder, out);
  return r;
}

}  // namespace ckptdoc::megatron
