#include "main_params.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "bucket_map.h"
#include "ckptdoc/compute/backend.h"
#include "ckptdoc/compute/nonfinite_as_exact.h"
#include "ckptdoc/dtype.h"
#include "ckptdoc/error.h"

namespace ckptdoc::megatron {
namespace {

constexpr const char* kPrefixes[] = {"optimizer.state.fp32_param.", "optimizer.state.param."};

// Calls f(offset into the global row-major tensor, offset into the box, run length) for each contiguous run
// of the box `offsets`/`sizes` inside a tensor of shape `global` (in elements).
template <class F>
void for_each_run(const std::vector<int64_t>& global, const std::vector<int64_t>& offsets,
                  const std::vector<int64_t>& sizes, F&& f) {
  const size_t nd = global.size();
  if (nd == 0) return f(int64_t{0}, int64_t{0}, int64_t{1});
  for (auto s : sizes)
    if (s == 0) return;
  std::vector<int64_t> idx(nd - 1, 0);  // the box's index over every dimension but the last
  int64_t box_at = 0;
  while (true) {
    int64_t g = 0;
    for (size_t d = 0; d < nd; ++d) g = g * global[d] + offsets[d] + (d + 1 < nd ? idx[d] : 0);
    f(g, box_at, sizes[nd - 1]);
    box_at += sizes[nd - 1];
    auto d = static_cast<std::ptrdiff_t>(nd) - 2;
    for (; d >= 0; --d) {
      const auto at = static_cast<size_t>(d);
      if (++idx[at] < sizes[at]) break;
      idx[at] = 0;
    }
    if (d < 0) return;
  }
}

// The whole tensor of `entry`, row-major, in its own dtype (element_size bytes each).
std::vector<uint8_t> read_whole(const dcp::Checkpoint& ckpt, const dcp::Entry& entry, size_t esize) {
  std::vector<uint8_t> out(static_cast<size_t>(entry.numel()) * esize);
  for (const auto& chunk : entry.chunks) {
    const auto bytes = ckpt.read_chunk(entry, chunk).to_bytes();
    for_each_run(entry.size, chunk.offsets, chunk.sizes, [&](int64_t g, int64_t b, int64_t n) {
      std::memcpy(out.data() + g * esize, bytes.data() + b * esize, n * esize);
    });
  }
  return out;
}

// Whether the chunks' boxes lie inside the global shape and add up to it (else the DCP diagnosis reports
// dcp-chunk-outside or -gap, and the comparison would read what is not there).
bool chunks_inside(const dcp::Entry& e) {
  int64_t covered = 0;
  for (const auto& c : e.chunks) {
    if (c.offsets.size() != e.size.size() || c.sizes.size() != e.size.size()) return false;
    for (size_t d = 0; d < e.size.size(); ++d)
      if (c.offsets[d] < 0 || c.sizes[d] < 0 || c.offsets[d] + c.sizes[d] > e.size[d]) return false;
    covered += c.numel();
  }
  return covered == e.numel();  // a gap would read as zeros
}

int rank_of(const std::string& file) {  // "__<rank>_<n>.distcp"
  if (file.rfind("__", 0) != 0) return -1;
  try {
    return std::stoi(file.substr(2));
  } catch (...) {
    return -1;
  }
}

constexpr const char* kBucketPrefix = "optimizer.distributed.";

// A slot's main: its slice of its bucket, read chunk by chunk (each chunk lies inside one param or one gap).
std::vector<float> read_slice(const dcp::Checkpoint& ckpt, const BucketGroup& g, const BucketSlot& slot) {
  const auto& bucket = *g.buckets[static_cast<size_t>(slot.bucket)];
  std::vector<float> slice(static_cast<size_t>(slot.numel));
  for (const auto& chunk : bucket.chunks) {
    const int64_t at = chunk.offsets[0], n = chunk.sizes[0];
    if (at < slot.start || at + n > slot.start + slot.numel) continue;  // another param's, or a gap
    const auto main = ckpt.read_chunk(bucket, chunk).to_float();
    std::memcpy(slice.data() + (at - slot.start), main.data(), static_cast<size_t>(n) * sizeof(float));
  }
  return slice;
}

// Whether `main` rounds exactly to `weight` (both of n elements).
bool rounds_to(Backend& backend, const std::vector<uint8_t>& weight, DType lp, const float* main, size_t n) {
  const auto d = backend.divergence(weight.data(), lp, main, n);
  return d.count > 0 && d.exact == d.count;
}

// One group of the bucket map compared: each param's slice of its bucket against its weight (the weight's
// chunk that is this param, so one param's bytes are held at a time), chunk by chunk; gap chunks hold
// torch.empty memory and are never read. Before a mismatch is reported, the swap test
// (docs/megatron-bucket-layout.md, check 4): a main that rounds exactly to another same-sized param's weight
// says the map's order is wrong, not that the mains are stale; the group is then not compared (returned
// empty, with why in `ambiguous`). The test compares the first kSample elements first, kept per param, and
// reads the two params whole only when those agree.
std::vector<analysis::ParamReport> compare_group(const dcp::Checkpoint& ckpt, const BucketMap& map,
                                                 const BucketGroup& g, Backend& backend,
                                                 std::map<int, std::set<std::string>>& files,
                                                 std::string& ambiguous) {
  constexpr size_t kSample = 64;
  const size_t esize = element_size(g.lp);
  std::vector<analysis::ParamReport> out;
  std::vector<std::vector<uint8_t>> weight_samples;
  std::vector<std::vector<float>> main_samples;
  for (const auto& slot : g.slots) {
    const auto box = ckpt.read_chunk(*slot.weight, *slot.chunk).to_bytes();
    const auto& bucket = *g.buckets[static_cast<size_t>(slot.bucket)];
    analysis::ParamReport r;
    r.name = bucket_param_name(map, g, slot);
    r.shape = slot.sizes;
    r.numel = slot.numel;
    r.lp_dtype = g.lp;
    r.tp = g.tp_rank;
    r.pp = g.pp_rank;
    const size_t sample = std::min(kSample, static_cast<size_t>(slot.numel));
    std::vector<float> main_sample(sample);
    DivergenceStats total;
    for (const auto& chunk : bucket.chunks) {
      const int64_t at = chunk.offsets[0], n = chunk.sizes[0];
      if (at < slot.start || at + n > slot.start + slot.numel) continue;  // another param's, or a gap
      const auto main = ckpt.read_chunk(bucket, chunk).to_float();
      const auto in_slot = static_cast<size_t>(at - slot.start);
      if (in_slot < sample)
        std::copy_n(main.begin(), std::min(sample - in_slot, main.size()), main_sample.begin() + in_slot);
      const auto d = divergence_nonfinite_as_exact(backend, box.data() + in_slot * esize, g.lp, main);
      total.merge(d);
      const int rank = chunk.item ? rank_of(chunk.item->file) : -1;
      r.per_rank[rank].merge(d);
      if (chunk.item) files[rank].insert(chunk.item->file);
    }
    r.lp_vs_fp32 = total;
    weight_samples.emplace_back(box.begin(), box.begin() + static_cast<std::ptrdiff_t>(sample * esize));
    main_samples.push_back(std::move(main_sample));
    out.push_back(std::move(r));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& d = *out[i].lp_vs_fp32;
    if (d.exact == d.count) continue;
    std::vector<float> main;  // read whole once a sample agrees
    for (size_t j = 0; j < out.size(); ++j) {
      const auto& a = g.slots[i];
      const auto& b = g.slots[j];
      if (j == i || b.numel != a.numel ||
          !rounds_to(backend, weight_samples[j], g.lp, main_samples[i].data(), main_samples[i].size()))
        continue;
      if (main.empty()) main = read_slice(ckpt, g, a);
      if (!rounds_to(backend, ckpt.read_chunk(*b.weight, *b.chunk).to_bytes(), g.lp, main.data(),
                     main.size()))
        continue;
      ambiguous = "the main at [" + std::to_string(a.start) + ", " + std::to_string(a.start + a.numel) +
                  ") of " + g.buckets[static_cast<size_t>(a.bucket)]->key + " rounds exactly to " + b.name +
                  "'s weight, not to " + a.name +
                  "'s: the bucket order is ambiguous, so no main of this group is judged";
      return {};
    }
  }
  return out;
}

// Bucket space (dp_reshardable): the map of bucket_map.h, each group compared, what is refused said in
// not_compared.
void compare_bucket_mains(const dcp::Checkpoint& ckpt, MainParamComparison& c, Backend& backend,
                          std::map<int, std::set<std::string>>& files, Progress* progress) {
  std::shared_ptr<BucketMap> made;
  try {
    made = std::make_shared<BucketMap>(map_buckets(ckpt.metadata(), stored_key_order(ckpt.metadata())));
  } catch (const Error& err) {
    c.not_compared.push_back(std::string("bucket space: ") + err.what());
    c.map_refused.emplace_back(err.what());
    return;
  }
  c.map = made;
  const BucketMap& map = *made;
  c.map_refused = map.refused;
  for (const auto& why : map.refused) c.not_compared.push_back("bucket space: " + why);
  size_t total = 0;
  for (const auto& g : map.groups) total += g.slots.size();
  c.bucket_params = total;
  if (progress) progress->set_stage(progress->stage(), total);
  for (const auto& g : map.groups) {
    if (progress) progress->check();
    const std::string label =
        "bucket space: " + g.label() + (map.vpp > 1 ? ".gbuf_idx_" + std::to_string(g.gbuf) : "") + ": ";
    try {
      std::string ambiguous;
      auto reports = compare_group(ckpt, map, g, backend, files, ambiguous);
      if (!ambiguous.empty()) {
        c.not_compared.push_back(label + ambiguous);
        continue;
      }
      for (size_t i = 0; i < reports.size(); ++i) {
        const auto& slot = g.slots[i];
        const auto& key = g.buckets[static_cast<size_t>(slot.bucket)]->key;
        c.key_of[reports[i].name] = key;
        c.slice_of[reports[i].name] =
            key + " [" + std::to_string(slot.start) + ", " + std::to_string(slot.start + slot.numel) + ")";
        c.params.push_back(std::move(reports[i]));
      }
      c.prefix = kBucketPrefix;
      c.lp_dtype = g.lp;
    } catch (const Error& err) {  // the DCP diagnosis names the missing or damaged item
      c.not_compared.push_back(label + err.what());
    }
    if (progress) progress->add(g.slots.size());
  }
}

}  // namespace

std::string bucket_param_name(const BucketMap& map, const BucketGroup& g, const BucketSlot& slot) {
  const bool qualify = map.groups.size() > 1 || !map.refused.empty();
  return qualify ? slot.name + " (" + g.label() + ")" : slot.name;
}

std::vector<MainPair> main_pairs(const dcp::Metadata& md, std::vector<std::string>& not_compared) {
  std::vector<MainPair> out;
  for (const auto& e : md.entries) {
    if (e.kind != dcp::EntryKind::Tensor || e.dtype != "float32") continue;
    for (const char* prefix : kPrefixes) {
      const std::string p = prefix;
      if (e.key.rfind(p, 0) != 0) continue;
      const std::string key = e.key.substr(p.size());
      const auto* w = md.find(key);
      if (!w || w->kind != dcp::EntryKind::Tensor) continue;
      const auto lp = dtype_from_name(w->dtype);
      if (!lp || (*lp != DType::BF16 && *lp != DType::F16)) continue;  // an fp32 model keeps no main copy
      if (w->size != (e.nd_flattened_from.empty() ? e.size : e.nd_flattened_from))
        not_compared.push_back(key + ": the main's shape differs from the weight's");
      else if (!chunks_inside(*w) || !chunks_inside(e))
        not_compared.push_back(key +
                               ": its chunks do not tile the global shape (see the dcp-chunk problems)");
      else
        out.push_back({&e, w, key, p, *lp});
    }
  }
  return out;
}

std::vector<uint8_t> read_weight(const dcp::Checkpoint& ckpt, const MainPair& pair) {
  return read_whole(ckpt, *pair.weight, element_size(pair.lp));
}

std::vector<uint8_t> weight_box(const std::vector<uint8_t>& weight, const MainPair& pair,
                                const dcp::Chunk& chunk) {
  const size_t esize = element_size(pair.lp);
  std::vector<uint8_t> box(static_cast<size_t>(chunk.numel()) * esize);
  for_each_run(pair.main->size, chunk.offsets, chunk.sizes, [&](int64_t g, int64_t b, int64_t n) {
    std::memcpy(box.data() + b * esize, weight.data() + g * esize, n * esize);
  });
  return box;
}

std::vector<uint8_t> weight_of_main_chunk(const std::vector<uint8_t>& weight, const MainPair& pair,
                                          const dcp::Chunk& chunk) {
  const auto& orig = pair.main->nd_flattened_from;
  if (orig.empty()) return weight_box(weight, pair, chunk);
  // The stored shape is (fragments along each original axis..., one fragment's elements): the chunk is one
  // fragment (size 1 on those axes) and a run of its elements.
  const auto& stored = pair.main->size;
  const size_t n = orig.size();
  std::vector<int64_t> offsets(n), sizes(n);
  int64_t fragment = 1;
  for (size_t d = 0; d < n; ++d) {
    if (chunk.sizes[d] != 1)
      throw Error(ErrorKind::Inconsistent, "", pair.main->key,
                  "an nd-flattened chunk spans more than one fragment of the original shape");
    sizes[d] = orig[d] / stored[d];
    offsets[d] = chunk.offsets[d] * sizes[d];
    fragment *= sizes[d];
  }
  const int64_t start = chunk.offsets[n], count = chunk.sizes[n];
  if (start < 0 || count < 0 || start + count > fragment)
    throw Error(ErrorKind::Inconsistent, "", pair.main->key, "an nd-flattened chunk runs past its fragment");
  const size_t esize = element_size(pair.lp);
  std::vector<uint8_t> box(static_cast<size_t>(fragment) * esize);
  for_each_run(orig, offsets, sizes, [&](int64_t g, int64_t b, int64_t k) {
    std::memcpy(box.data() + b * esize, weight.data() + g * esize, k * esize);
  });
  return {box.begin() + start * static_cast<int64_t>(esize),
          box.begin() + (start + count) * static_cast<int64_t>(esize)};
}

MainParamComparison compare_main_params(const dcp::Checkpoint& ckpt, Progress* progress) {
  MainParamComparison c;
  const auto& md = ckpt.metadata();
  for (const auto& e : md.entries)
    if (is_bucket_space_key(e.key)) c.bucket_space = true;
  auto backend = make_cpu_backend(1);
  std::map<int, std::set<std::string>> files;
  const auto pairs = main_pairs(md, c.not_compared);
  if (c.bucket_space && pairs.empty()) {
    compare_bucket_mains(ckpt, c, *backend, files, progress);
    for (auto& [rank, names] : files) c.files_by_rank[rank].assign(names.begin(), names.end());
    return c;
  }
  if (progress) progress->set_stage(progress->stage(), pairs.size());
  for (const auto& pair : pairs) {
    if (progress) progress->check();
    try {
      const auto weight = read_weight(ckpt, pair);
      analysis::ParamReport r;
      r.name = pair.key;
      r.shape = pair.weight->size;
      r.numel = pair.weight->numel();
      r.lp_dtype = pair.lp;
      DivergenceStats total;
      for (const auto& chunk : pair.main->chunks) {
        const auto main = ckpt.read_chunk(*pair.main, chunk).to_float();
        const auto box = weight_of_main_chunk(weight, pair, chunk);
        const auto d = divergence_nonfinite_as_exact(*backend, box.data(), pair.lp, main);
        total.merge(d);
        const int rank = chunk.item ? rank_of(chunk.item->file) : -1;
        r.per_rank[rank].merge(d);
        if (chunk.item) files[rank].insert(chunk.item->file);
      }
      r.lp_vs_fp32 = total;
      c.params.push_back(std::move(r));
      c.prefix = pair.prefix;
      c.lp_dtype = pair.lp;
    } catch (const Error& err) {  // the DCP diagnosis names the missing or damaged item
      c.not_compared.push_back(pair.key + ": " + err.what());
    }
    if (progress) progress->add(1);
  }
  for (auto& [rank, names] : files) c.files_by_rank[rank].assign(names.begin(), names.end());
  return c;
}

std::vector<analysis::Finding> main_param_findings(const MainParamComparison& c) {
  analysis::MasterContext ctx;
  ctx.lp_dtype = c.lp_dtype;
  const bool buckets = c.prefix == kBucketPrefix;
  const bool chained = std::any_of(c.key_of.begin(), c.key_of.end(),
                                   [](const auto& kv) { return chained_prefix_length(kv.second) > 0; });
  ctx.masters = buckets
                    ? std::string("fp32 main params (their slices of the DistributedOptimizer") +
                          (chained ? "s'" : "'s") + " `param` buckets, " + (chained ? "chained_<c>." : "") +
                          c.prefix + "dp_group_idx_<i>.gbuf_idx_<g>.dtype_(...).bucket_idx_<b>.param)"
                    : "fp32 main params (" + c.prefix + "<key>)";
  ctx.cause =
      "e.g. a --finetune / --no-load-optim load that never called optimizer.reload_model_params(), "
      "Megatron-LM "
      "#174";
  ctx.fix =
      buckets
          ? "ckptdoc repair --refresh-fp32 (each param's slice of the `param` buckets := its weight upcast), "
            "or Megatron-LM's optimizer.reload_model_params() after loading the weights"
          : "ckptdoc repair --refresh-fp32, or Megatron-LM's optimizer.reload_model_params() after loading "
            "the weights";
  ctx.files_of = [&c](const std::set<int>& ranks) {
    std::vector<std::string> out;
    for (int r : ranks)
      if (auto it = c.files_by_rank.find(r); it != c.files_by_rank.end())
        out.insert(out.end(), it->second.begin(), it->second.end());
    return out;
  };
  std::vector<analysis::Finding> out;
  analysis::master_findings(c.params, ctx, {}, out);
  return out;
}

}  // namespace ckptdoc::megatron
