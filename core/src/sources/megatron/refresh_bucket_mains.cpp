// repair --refresh-fp32 of a bucket-space (dp_reshardable) Megatron-core save (see refresh_bucket_mains.h).
#include "refresh_bucket_mains.h"

#include <cstring>
#include <span>

#include "bucket_map.h"
#include "ckptdoc/error.h"
#include "ckptdoc/request_field.h"
#include "main_params.h"
#include "repaired_copy.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::megatron {
namespace {

// The float32 bytes of `box` (in `lp`) upcast, little-endian.
std::vector<uint8_t> upcast(const std::vector<uint8_t>& box, DType lp) {
  const Tensor t = Tensor::from_bytes(lp, {static_cast<int64_t>(box.size() / element_size(lp))}, box);
  const auto f = t.to_float();
  std::vector<uint8_t> out(f.size() * sizeof(float));
  std::memcpy(out.data(), f.data(), out.size());
  return out;
}

bool inside(const dcp::Chunk& c, int64_t begin, int64_t end) {
  return c.offsets[0] >= begin && c.offsets[0] + c.sizes[0] <= end;
}

// Writes `data` over the record of `chunk` of bucket `e` (its item and every replica) in the copy.
size_t rewrite_chunk(const dcp::Checkpoint& in, const dcp::Entry& e, const dcp::Chunk& chunk,
                     std::span<const uint8_t> data, const std::string& where, const std::string& copy_dir) {
  if (!chunk.item) throw Error(ErrorKind::Inconsistent, where, e.key, "a chunk has no storage item");
  const Tensor stored = dcp::Checkpoint::chunk_tensor(e, chunk, in.open_item(*chunk.item));
  std::vector<dcp::StorageItem> items{*chunk.item};
  items.insert(items.end(), chunk.replicas.begin(), chunk.replicas.end());
  for (const auto& item : items) {
    const auto record = dcp::storage_record(in, item, e.key);
    if (stored.dtype != DType::F32 || !stored.is_contiguous() || stored.storage_offset != 0 ||
        record.entry.size != data.size())
      throw Error(
          ErrorKind::Unsupported, record.where, "",
          "not a plain contiguous float32 record of the chunk's size: not rewritten, nothing written");
    dcp::write_record(record, data, copy_dir);
  }
  return items.size();
}

}  // namespace

RefreshResult refresh_bucket_mains(const IterationFolder& folder, const dcp::Checkpoint& in,
                                   const std::string& out, Progress* progress) {
  const auto refuse = [&](const std::string& why) {
    return Error(
        ErrorKind::Unsupported, folder.dir, request_text("{refresh_fp32}"),
        "the bucket-space fp32 main params (optimizer.distributed.*.param) cannot all be refreshed: " + why +
            "; nothing was written");
  };
  // What diagnose cannot judge is not rewritten: a refused map, an order the mains say is ambiguous (there a
  // refresh would write each weight into another param's slice), a chunk that cannot be read.
  if (progress) progress->set_stage("comparing the mains with their weights", 0);
  const auto before = compare_main_params(in, progress);
  if (!before.not_compared.empty()) throw refuse(before.not_compared.front());
  const auto map = map_buckets(in.metadata(), stored_key_order(in.metadata()));
  if (!map.refused.empty()) throw refuse(map.refused.front());
  size_t total = 0;
  for (const auto& g : map.groups) total += g.slots.size();
  if (total == 0) throw refuse("no bucket holds the fp32 mains of bf16 or fp16 params");
  if (before.params.size() != total)
    throw refuse("the map places " + std::to_string(total) + " params and diagnose compares " +
                 std::to_string(before.params.size()));

  RefreshResult r;
  r.output = out;
  r.prefix = "optimizer.distributed.";
  r.bucket_space = true;
  r.integrity_dropped = has_integrity(folder);
  for (const auto& g : map.groups)
    for (size_t b = 0; b < g.buckets.size(); ++b)
      for (const auto& [begin, end] : g.gaps(static_cast<int>(b))) r.gap_elements += end - begin;
  write_repaired_copy(folder, out, CopyInput::Whole, progress, [&](const std::string& tmp_iter) {
    Progress none;
    Progress& p = progress ? *progress : none;
    p.set_stage("refreshing " + std::to_string(total) + " main params", total);
    for (const auto& g : map.groups)
      for (const auto& slot : g.slots) {
        p.check();
        const auto& bucket = *g.buckets[static_cast<size_t>(slot.bucket)];
        const auto main = upcast(in.read_chunk(*slot.weight, *slot.chunk).to_bytes(), g.lp);
        int64_t covered = 0;
        for (const auto& chunk : bucket.chunks) {
          if (!inside(chunk, slot.start, slot.start + slot.numel)) continue;  // another param's, or a gap
          const auto at = static_cast<size_t>(chunk.offsets[0] - slot.start) * sizeof(float);
          r.chunks += rewrite_chunk(
              in, bucket, chunk,
              std::span<const uint8_t>(main).subspan(at, static_cast<size_t>(chunk.sizes[0]) * sizeof(float)),
              folder.dir, tmp_iter);
          covered += chunk.sizes[0];
        }
        if (covered != slot.numel)
          throw Error(ErrorKind::Inconsistent, folder.dir, bucket.key,
                      "the chunks inside " + slot.name + "'s slice cover " + std::to_string(covered) +
                          " of its " + std::to_string(slot.numel) + " elements: nothing was written");
        ++r.params;
        p.add(1);
      }

    // The copy is checked before it is published: every slice the exact upcast of its weight (diagnose's own
    // comparison of the copy), every gap chunk the input's bytes.
    p.set_stage("checking the copy", 0);
    const auto copy = dcp::Checkpoint::open(tmp_iter);
    const auto check = compare_main_params(*copy, &p);
    if (check.params.size() != r.params || !check.not_compared.empty())
      throw Error(ErrorKind::Inconsistent, tmp_iter, request_text("{refresh_fp32}"),
                  "the copy's mains could not all be compared");
    for (const auto& param : check.params)
      if (param.lp_vs_fp32->exact != param.lp_vs_fp32->count || param.lp_vs_fp32->max_abs != 0)
        throw Error(ErrorKind::Inconsistent, tmp_iter, param.name,
                    "the refreshed main is not its weight upcast");
    for (const auto& g : map.groups)
      for (size_t b = 0; b < g.buckets.size(); ++b) {
        const auto& bucket = *g.buckets[b];
        const auto* copied = copy->metadata().find(bucket.key);
        if (!copied || copied->chunks.size() != bucket.chunks.size())
          throw Error(ErrorKind::Inconsistent, tmp_iter, bucket.key, "not the input's chunks in the copy");
        for (const auto& [begin, end] : g.gaps(static_cast<int>(b)))
          for (size_t c = 0; c < bucket.chunks.size(); ++c) {
            p.check();
            if (inside(bucket.chunks[c], begin, end) &&
                in.read_chunk(bucket, bucket.chunks[c]).to_bytes() !=
                    copy->read_chunk(*copied, copied->chunks[c]).to_bytes())
              throw Error(ErrorKind::Inconsistent, tmp_iter, bucket.key,
                          "a 64-alignment gap is not the input's bytes in the copy");
          }
      }
  });
  r.iteration_dir = repaired_iteration_dir(folder, out);
  return r;
}

}  // namespace ckptdoc::megatron
