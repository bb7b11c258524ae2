#include "refresh_mains.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "main_params.h"
#include "refresh_bucket_mains.h"
#include "repaired_copy.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::megatron {
namespace fs = std::filesystem;
namespace {

// The float32 bytes of `box` (the weight's dtype) upcast, little-endian.
std::vector<uint8_t> upcast(const std::vector<uint8_t>& box, DType lp) {
  const Tensor t = Tensor::from_bytes(lp, {static_cast<int64_t>(box.size() / element_size(lp))}, box);
  const auto f = t.to_float();
  std::vector<uint8_t> out(f.size() * 4);
  std::memcpy(out.data(), f.data(), out.size());
  return out;
}

// Rewrites one main chunk of the copy at `copy_dir` (same file names and offsets as the input).
void rewrite_chunk(const dcp::Checkpoint& in, const MainPair& pair, const dcp::Chunk& chunk,
                   const std::vector<uint8_t>& data, const std::string& copy_dir) {
  const auto& item = *chunk.item;
  const auto record = dcp::storage_record(in, item, pair.main->key);
  const Tensor stored = dcp::Checkpoint::chunk_tensor(*pair.main, chunk, in.open_item(item));
  if (stored.dtype != DType::F32 || !stored.is_contiguous() || stored.storage_offset != 0 ||
      record.entry.size != data.size())
    throw Error(ErrorKind::Unsupported, record.where, "",
                "not a plain contiguous float32 record of the chunk's size: not rewritten");
  dcp::write_record(record, data, copy_dir);
}

}  // namespace

RefreshResult refresh_main_params(const std::string& path, const std::string& output, Progress* progress) {
  const auto folder = resolve(path);
  const std::string out = dcp::checked_new_output(output, {path, folder.dir});

  const auto in = dcp::Checkpoint::open(folder.dir);
  std::vector<std::string> not_paired;
  const auto pairs = main_pairs(in->metadata(), not_paired);
  const auto& entries = in->metadata().entries;
  const bool buckets = std::any_of(entries.begin(), entries.end(), [](const dcp::Entry& e) {
    return e.key.rfind("optimizer.distributed.", 0) == 0 || is_chained_bucket_key(e.key);
  });
  if (pairs.empty() && not_paired.empty() && buckets) return refresh_bucket_mains(folder, *in, out, progress);
  if (pairs.empty())
    throw Error(
        ErrorKind::Unsupported, folder.dir, request_text("{refresh_fp32}"),
        "holds no optimizer.state.fp32_param.<key> or optimizer.state.param.<key> beside a bf16 or fp16 "
        "weight: nothing to refresh");
  if (!not_paired.empty())
    throw Error(ErrorKind::Unsupported, folder.dir, request_text("{refresh_fp32}"),
                "cannot refresh " + not_paired.front());

  RefreshResult r;
  r.output = out;
  r.integrity_dropped = has_integrity(folder);
  write_repaired_copy(folder, out, CopyInput::Whole, progress, [&](const std::string& tmp_iter) {
    const auto& md = in->metadata();
    Progress none;
    Progress& p = progress ? *progress : none;
    p.set_stage("refreshing " + std::to_string(pairs.size()) + " main params", pairs.size());
    for (const auto& pair : pairs) {
      p.check();
      const auto weight = read_weight(*in, pair);
      for (const auto& chunk : pair.main->chunks) {
        if (!chunk.item)
          throw Error(ErrorKind::Inconsistent, folder.dir, pair.main->key, "a chunk has no storage item");
        rewrite_chunk(*in, pair, chunk, upcast(weight_of_main_chunk(weight, pair, chunk), pair.lp), tmp_iter);
        ++r.chunks;
      }
      ++r.params;
      r.prefix = pair.prefix;
      for (const char* moment : {"optimizer.state.exp_avg.", "optimizer.state.exp_avg_sq."})
        if (!md.find(moment + pair.key)) {
          r.absent_moments.push_back(pair.key);
          break;
        }
      p.add(1);
    }
    // The copy is checked before it is published: every main now the exact upcast of its weight. The stage
    // counts the params compared and stops at a cancel between them (the partial folder is then removed).
    p.set_stage("checking the copy", 0);
    const auto check = compare_main_params(*dcp::Checkpoint::open(tmp_iter), &p);
    if (check.params.size() != r.params || !check.not_compared.empty())
      throw Error(ErrorKind::Inconsistent, tmp_iter, request_text("{refresh_fp32}"),
                  "the copy's mains could not all be compared");
    for (const auto& p : check.params)
      if (p.lp_vs_fp32->exact != p.lp_vs_fp32->count || p.lp_vs_fp32->max_abs != 0)
        throw Error(ErrorKind::Inconsistent, tmp_iter, p.name, "the refreshed main is not its weight upcast");
  });
  r.iteration_dir = repaired_iteration_dir(folder, out);
  return r;
}

}  // namespace ckptdoc::megatron
