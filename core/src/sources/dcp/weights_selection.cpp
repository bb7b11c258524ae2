// select_weights: which DCP keys are model weights, and each one as a tensor produced from its chunks.
#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/dcp/diagnose.h"
#include "ckptdoc/sources/dcp/export.h"
#include "format/tensor_stream.h"

namespace ckptdoc::dcp {
namespace {

std::string where_key(const Entry& e) {
  return "key '" + e.key + "'";
}

// FSDP2 and most planners cut dim 0 only: then every chunk is a run of whole rows, and the chunks taken in
// row order are the tensor's bytes in order, streamed straight from the mapped files with no buffer.
bool cut_along_rows_only(const Entry& e) {
  if (e.size.empty()) return false;
  for (const auto& c : e.chunks)
    for (size_t d = 1; d < e.size.size(); ++d)
      if (c.offsets[d] != 0 || c.sizes[d] != e.size[d]) return false;
  return true;
}

// A chunk is read once: its mapped pages are handed back, so an export's memory stays at about one chunk, not
// the weights (the page cache keeps them for a second reader).
void hand_back(const Checkpoint& ckpt, const Chunk& c) {
  ckpt.file(c.item->file)->dont_need(c.item->offset, c.item->length);
}

void stream_rows(const Checkpoint& ckpt, const Entry& e, ByteSink& sink) {
  std::vector<const Chunk*> order;
  for (const auto& c : e.chunks) order.push_back(&c);
  std::sort(order.begin(), order.end(),
            [](const Chunk* a, const Chunk* b) { return a->offsets[0] < b->offsets[0]; });
  for (const Chunk* c : order) {
    const Tensor t = ckpt.read_chunk(e, *c);
    detail::stream_row_major(c->item->file, e.key, t, sink);
    t.check_unchanged();
    hand_back(ckpt, *c);
  }
}

// Any other tiling: the tensor is assembled in one buffer (one tensor in memory at a time), each chunk's rows
// copied to their place, then written.
void assemble_and_write(const Checkpoint& ckpt, const Entry& e, DType dtype, ByteSink& sink) {
  const size_t esize = element_size(dtype);
  const auto global_strides = Tensor::contiguous_strides(e.size);
  std::vector<uint8_t> out(static_cast<size_t>(e.numel()) * esize);
  for (const auto& c : e.chunks) {
    if (c.numel() == 0) continue;
    const Tensor t = ckpt.read_chunk(e, c);
    const std::vector<uint8_t> local = t.to_bytes();
    t.check_unchanged();
    hand_back(ckpt, c);
    const size_t rank = e.size.size();
    const int64_t run = rank == 0 ? 1 : c.sizes[rank - 1];  // elements copied at once: one row of the chunk
    const size_t run_bytes = static_cast<size_t>(run) * esize;
    std::vector<int64_t> index(rank, 0);  // position inside the chunk, last dim fixed at 0
    for (size_t from = 0; from < local.size(); from += run_bytes) {
      int64_t at = 0;
      for (size_t d = 0; d < rank; ++d) at += (c.offsets[d] + index[d]) * global_strides[d];
      std::memcpy(out.data() + static_cast<size_t>(at) * esize, local.data() + from, run_bytes);
      for (size_t d = rank >= 2 ? rank - 1 : 0; d > 0; --d) {  // odometer over every dim but the last
        if (++index[d - 1] < c.sizes[d - 1]) break;
        index[d - 1] = 0;
      }
    }
  }
  sink.write(out);
}

// The tensor of key `e`, produced from its chunks when pulled, named `name`. Refused by key before anything
// is written unless its chunks tile its shape and each has a storage item.
NamedTensor produced(const Checkpoint& ckpt, const std::string& metadata_path, const Entry& e,
                     std::string name) {
  // Before tiling_problems, which indexes the shape by each chunk's dims.
  for (const auto& c : e.chunks)
    if (c.offsets.size() != e.size.size() || c.sizes.size() != e.size.size())
      throw Error(ErrorKind::Corrupt, metadata_path, where_key(e),
                  "a chunk's rank is not the tensor's; nothing is written");
  for (const auto& p : tiling_problems(e))
    if (p.severity == model::Severity::Error)
      throw Error(ErrorKind::Inconsistent, metadata_path, where_key(e),
                  "its chunks do not make up the tensor (" + p.message + "); nothing is written");
  for (const auto& c : e.chunks)
    if (!c.item)
      throw Error(ErrorKind::NotFound, metadata_path, where_key(e),
                  "a chunk has no storage item in .metadata; nothing is written");
  const auto dtype = dtype_from_name(e.dtype);
  if (!dtype)
    throw Error(ErrorKind::Unsupported, metadata_path, where_key(e), "dtype '" + e.dtype + "' is not known");
  const Checkpoint* from = &ckpt;
  const bool rows = cut_along_rows_only(e);
  return {std::move(name),
          Tensor::produced(*dtype, e.size, [from, entry = e, rows, d = *dtype](ByteSink& sink) {
            if (rows)
              stream_rows(*from, entry, sink);
            else
              assemble_and_write(*from, entry, d, sink);
          })};
}

// Stripped when every name has it (and more): Accelerate saves {"model": state_dict}, and the model's own
// names are what a Hugging Face folder holds. A partial prefix is a real name and is kept.
constexpr std::string_view kModelPrefix = "model.";

bool all_under_model(const std::vector<std::string>& names) {
  return !names.empty() && std::all_of(names.begin(), names.end(), [](const std::string& n) {
    return n.starts_with(kModelPrefix) && n.size() > kModelPrefix.size();
  });
}

}  // namespace

bool is_optimizer_key(const std::string& key) {
  if (key.starts_with("optimizer.")) return true;
  constexpr std::string_view kChained = "chained_";
  if (!key.starts_with(kChained)) return false;
  size_t at = kChained.size();
  const size_t digits = at;
  while (at < key.size() && key[at] >= '0' && key[at] <= '9') ++at;
  return at > digits && std::string_view(key).substr(at).starts_with(".optimizer.");
}

bool is_model_key(const std::string& key) {
  static constexpr std::array<std::string_view, 4> kState = {"lr_scheduler.", "scheduler.", "dataloader.",
                                                             "train_state."};
  return !is_optimizer_key(key) &&
         std::none_of(kState.begin(), kState.end(), [&](std::string_view p) { return key.starts_with(p); });
}

WeightsSelection select_weights(const Checkpoint& ckpt) {
  const auto& md = ckpt.metadata();
  WeightsSelection s;
  std::vector<const Entry*> weights;
  for (const auto& e : md.entries) {
    if (e.kind == EntryKind::Bytes)
      ++s.bytes_items_left_out;
    else if (!is_model_key(e.key))
      ++s.state_tensors_left_out;
    else
      weights.push_back(&e);
  }
  if (weights.empty())
    throw Error(ErrorKind::NotFound, md.path, "",
                "no model weights: every tensor key is optimizer, scheduler, dataloader or train state");
  std::vector<std::string> keys;
  keys.reserve(weights.size());
  for (const Entry* e : weights) keys.push_back(e->key);
  const bool strip = all_under_model(keys);
  if (strip) s.stripped_prefix = kModelPrefix;
  for (const Entry* e : weights)
    s.tensors.push_back(produced(ckpt, md.path, *e, strip ? e->key.substr(kModelPrefix.size()) : e->key));
  return s;
}

WeightsSelection select_moments(const Checkpoint& ckpt, const std::string& moment) {
  const auto& md = ckpt.metadata();
  const std::string state = "optimizer.state.", suffix = "." + moment, leading = state + moment + ".";
  WeightsSelection s;
  std::vector<std::pair<const Entry*, std::string>> found;  // the entry and its param's name
  for (const auto& e : md.entries) {
    if (e.kind == EntryKind::Bytes || !e.key.starts_with(state)) continue;
    if (e.key.starts_with(leading) && e.key.size() > leading.size())  // Megatron-core: <moment>.<key>
      found.emplace_back(&e, e.key.substr(leading.size()));
    else if (e.key.ends_with(suffix) && e.key.size() > state.size() + suffix.size())  // torch: <fqn>.<moment>
      found.emplace_back(&e, e.key.substr(state.size(), e.key.size() - state.size() - suffix.size()));
  }
  // megatron-core's DistributedOptimizer in its default dp_reshardable layout keeps the moments as flat
  // buckets (optimizer.distributed.<dp group>.<grad buffer>.<bucket>.<moment>): moments, but of no param.
  const std::string buckets = "optimizer.distributed.";
  const auto in_buckets = std::count_if(md.entries.begin(), md.entries.end(), [&](const Entry& e) {
    return e.kind != EntryKind::Bytes && e.key.starts_with(buckets) && e.key.ends_with(suffix);
  });
  if (found.empty() && in_buckets > 0)
    throw Error(
        ErrorKind::Unsupported, md.path, "",
        "its " + moment + " is in megatron-core's bucket space (" + std::to_string(in_buckets) +
            " tensors optimizer.distributed.*." + moment +
            ": DistributedOptimizer's dp_reshardable layout), flat buckets and not per param, so there "
            "is nothing to compare by name; a fully_reshardable save keeps the moments per param");
  if (found.empty())
    throw Error(ErrorKind::NotFound, md.path, "",
                "no optimizer." + moment + " of any param (neither optimizer.state.<param>." + moment +
                    " nor optimizer.state." + moment +
                    ".<param>): the save holds no Adam moments to compare");
  std::vector<std::string> names;
  names.reserve(found.size());
  for (const auto& [e, name] : found) names.push_back(name);
  const bool strip = all_under_model(names);
  if (strip) s.stripped_prefix = kModelPrefix;
  for (const auto& [e, name] : found)
    s.tensors.push_back(produced(ckpt, md.path, *e, strip ? name.substr(kModelPrefix.size()) : name));
  return s;
}

}  // namespace ckptdoc::dcp
