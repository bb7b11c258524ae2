// The param -> (bucket, offset, numel) map of a bucket-space save (see bucket_map.h and
// docs/megatron-bucket-layout.md, which cites megatron-core's layout rules).
#include "bucket_map.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/plural.h"

namespace ckptdoc::megatron {
namespace {

constexpr const char* kBucketPrefix = "optimizer.distributed.";
constexpr int64_t kParamAlign = 64;  // each param's start in the buffer (param_and_grad_buffer.py:658-665)

int64_t round_up(int64_t n, int64_t d) {
  return (n + d - 1) / d * d;
}

std::optional<int> number_after(const std::string& s, const std::string& label, size_t& at) {
  if (s.compare(at, label.size(), label) != 0) return std::nullopt;
  at += label.size();
  const size_t digits = at;
  while (at < s.size() && s[at] >= '0' && s[at] <= '9') ++at;
  if (at == digits || at - digits > 6) return std::nullopt;
  return std::stoi(s.substr(digits, at - digits));
}

bool layer_stacked(const std::string& key) {  // decoder.layers.*: axis 0 is the layer, one chunk per layer
  return key.rfind("decoder.layers.", 0) == 0;
}

// One model key's chunks as one model-parallel rank holds them: by layer (stacked keys) or the one chunk.
struct KeyChunks {
  const dcp::Entry* entry = nullptr;
  std::map<int64_t, const dcp::Chunk*> by_layer;  // stacked: layer -> this tp rank's chunk
  const dcp::Chunk* whole = nullptr;              // not stacked: this tp rank's chunk
};

// The axis a key is cut along across tensor ranks (not the layer axis), with its distinct offsets.
std::vector<std::pair<size_t, std::vector<int64_t>>> cut_axes(const dcp::Entry& e) {
  std::vector<std::pair<size_t, std::vector<int64_t>>> out;
  for (size_t ax = layer_stacked(e.key) ? 1 : 0; ax < e.size.size(); ++ax) {
    std::set<int64_t> offs;
    for (const auto& c : e.chunks) offs.insert(c.offsets[ax]);
    if (offs.size() > 1) out.push_back({ax, {offs.begin(), offs.end()}});
  }
  return out;
}

// Throws the why of a refusal (caught per group or for the save).
struct Refusal {
  std::string why;
};

KeyChunks chunks_of_rank(const dcp::Entry& e, int tp, int tp_rank) {
  KeyChunks k;
  k.entry = &e;
  std::vector<const dcp::Chunk*> mine;
  const auto axes = cut_axes(e);
  if (!axes.empty() && static_cast<int>(axes[0].second.size()) != tp)
    throw Refusal{e.key + " is cut into " + std::to_string(axes[0].second.size()) + " along axis " +
                  std::to_string(axes[0].first) + ", not tp " + std::to_string(tp)};
  for (const auto& c : e.chunks)
    if (axes.empty() || c.offsets[axes[0].first] == axes[0].second[static_cast<size_t>(tp_rank)])
      mine.push_back(&c);
  if (layer_stacked(e.key)) {
    for (const auto* c : mine) {
      if (e.size.empty() || c->sizes[0] != 1 || !k.by_layer.emplace(c->offsets[0], c).second)
        throw Refusal{e.key + ": a chunk that is not one layer of one tensor rank"};
    }
  } else {
    if (mine.size() != 1)
      throw Refusal{e.key + ": " + std::to_string(mine.size()) + " chunks for one tensor rank"};
    k.whole = mine.front();
  }
  return k;
}

int64_t numel_of(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

// The rank's params in model (named_parameters) order: the non-layer keys before the first layer key, each
// layer's keys in key order, the non-layer keys after (docs/megatron-bucket-layout.md, "Reconstruction" 2).
std::vector<BucketSlot> rank_params(const std::vector<const dcp::Entry*>& keys, int tp, int tp_rank, int pp,
                                    int pp_rank, int vpp, int vp_rank) {
  std::vector<KeyChunks> before, layers, after;
  std::set<int64_t> layer_ids;
  for (const auto* e : keys) {
    auto k = chunks_of_rank(*e, tp, tp_rank);
    if (layer_stacked(e->key)) {
      for (const auto& [l, c] : k.by_layer) layer_ids.insert(l);
      layers.push_back(std::move(k));
    } else {
      (layers.empty() ? before : after).push_back(std::move(k));
    }
  }
  std::vector<int64_t> ids(layer_ids.begin(), layer_ids.end());
  if (pp > 1) {
    // model chunk vp_rank of stage pp_rank holds part vp_rank * pp + pp_rank of the pp * vpp even parts
    // (get_transformer_layer_offset); the embeddings are the first part's, the output layer the last's
    const int parts = pp * vpp, part = vp_rank * pp + pp_rank;
    if (ids.size() % static_cast<size_t>(parts) != 0)
      throw Refusal{plural(ids.size(), "layer") + (ids.size() == 1 ? " does" : " do") +
                    " not split evenly over " + std::to_string(pp) + " pipeline stages" +
                    (vpp > 1 ? " x " + std::to_string(vpp) + " model chunks" : "") +
                    " (an uneven split is not mapped)"};
    const auto n = static_cast<std::ptrdiff_t>(ids.size()) / parts;
    ids = {ids.begin() + part * n, ids.begin() + (part + 1) * n};
    const bool tied =
        std::none_of(keys.begin(), keys.end(), [](const auto* e) { return e->key == "output_layer.weight"; });
    if (part == parts - 1 && tied) {
      // the last stage's output layer: its own copy of the word embeddings, saved only as their replica
      for (const auto& k : before)
        if (k.entry->key == "embedding.word_embeddings.weight") after.push_back(k);
    }
    if (part != 0) before.clear();
    if (part != parts - 1) after.clear();
  }
  std::vector<BucketSlot> out;
  auto add = [&](const KeyChunks& k, const dcp::Chunk& c, std::string name) {
    BucketSlot s;
    s.name = std::move(name);
    s.weight = k.entry;
    s.chunk = &c;
    s.offsets = c.offsets;
    s.sizes = c.sizes;
    s.numel = numel_of(c.sizes);
    out.push_back(std::move(s));
  };
  for (const auto& k : before) add(k, *k.whole, k.entry->key);
  for (const int64_t l : ids)
    for (const auto& k : layers) {
      const auto it = k.by_layer.find(l);
      if (it == k.by_layer.end())
        throw Refusal{k.entry->key + " has no chunk for layer " + std::to_string(l)};
      add(k, *it->second,
          "decoder.layers." + std::to_string(l) + "." +
              k.entry->key.substr(std::string("decoder.layers.").size()));
    }
  for (const auto& k : after) {
    const bool copy = pp > 1 && k.entry->key == "embedding.word_embeddings.weight";
    add(k, *k.whole,
        copy ? "output_layer.weight (tied copy of embedding.word_embeddings.weight)" : k.entry->key);
  }
  return out;
}

// The walk (docs/megatron-bucket-layout.md, "Reconstruction" 3-4): reversed, 64-aligned, buckets closed at
// their tensors' sizes. Fills each slot's bucket and start; returns them in buffer order.
std::vector<BucketSlot> walk(std::vector<BucketSlot> params, const std::vector<int64_t>& bucket_sizes) {
  std::reverse(params.begin(), params.end());
  size_t b = 0;
  int64_t o = 0;
  for (auto& p : params) {
    if (b >= bucket_sizes.size())
      throw Refusal{"the walk has " + p.name + " left over after the last bucket"};
    o = round_up(o, kParamAlign);
    p.bucket = static_cast<int>(b);
    p.start = o;
    o += p.numel;
    const int64_t u = bucket_sizes[b];
    if (o == u || (o < u && round_up(o, kParamAlign) == u)) {  // the latter: before a shared embedding
      ++b;
      o = 0;
    } else if (o > u) {
      throw Refusal{"the walk puts " + p.name + " at [" + std::to_string(p.start) + ", " + std::to_string(o) +
                    ") past bucket " + std::to_string(b) + "'s " + std::to_string(u) + " elements"};
    }
  }
  if (b != bucket_sizes.size())
    throw Refusal{"the walk's params run out in bucket " + std::to_string(b) + " of " +
                  std::to_string(bucket_sizes.size())};
  return params;
}

// Check 2: each bucket's chunks tile it; every param boundary is a chunk cut; every other cut is a DP shard
// cut k*P/dp (P the bucket padded to lcm(dp, 128)) for one dp over all buckets, and each such cut is there.
void check_cuts(const BucketGroup& g) {
  std::set<int> dps;
  for (int d = 1; d <= 128; ++d) dps.insert(d);
  for (size_t b = 0; b < g.buckets.size(); ++b) {
    const auto& e = *g.buckets[b];
    const int64_t size = e.size[0];
    std::vector<std::pair<int64_t, int64_t>> chunks;
    for (const auto& c : e.chunks) chunks.push_back({c.offsets[0], c.offsets[0] + c.sizes[0]});
    std::sort(chunks.begin(), chunks.end());
    int64_t at = 0;
    std::set<int64_t> cuts{0};
    for (const auto& [s, end] : chunks) {
      if (s != at) throw Refusal{e.key + ": its chunks do not tile it at element " + std::to_string(at)};
      at = end;
      cuts.insert(end);
    }
    if (at != size) throw Refusal{e.key + ": its chunks end at " + std::to_string(at)};
    std::set<int64_t> bounds{0, size};
    for (const auto& s : g.slots) {
      if (s.bucket != static_cast<int>(b)) continue;
      for (const int64_t x : {s.start, s.start + s.numel}) {
        if (!cuts.contains(x))
          throw Refusal{e.key + ": no chunk cut at " + std::to_string(x) +
                        ", where the map puts a boundary of " + s.name};
        bounds.insert(x);
      }
    }
    std::set<int64_t> extra;
    std::set_difference(cuts.begin(), cuts.end(), bounds.begin(), bounds.end(),
                        std::inserter(extra, extra.end()));
    for (auto it = dps.begin(); it != dps.end();) {
      const int64_t dp = *it;
      const int64_t padded = round_up(size, std::lcm(dp, int64_t{128}));
      std::set<int64_t> need;
      for (int64_t k = 1; k < dp; ++k)
        if (k * (padded / dp) < size) need.insert(k * (padded / dp));
      const bool fits = std::includes(need.begin(), need.end(), extra.begin(), extra.end()) &&
                        std::includes(cuts.begin(), cuts.end(), need.begin(), need.end());
      it = fits ? std::next(it) : dps.erase(it);
    }
  }
  if (dps.empty())
    throw Refusal{
        "the bucket chunks' cuts are neither param boundaries of the map nor the DP shard cuts of "
        "one DP size"};
}

}  // namespace

std::optional<BucketKey> parse_bucket_key(const std::string& key) {
  if (key.rfind(kBucketPrefix, 0) != 0) return std::nullopt;
  size_t at = std::string(kBucketPrefix).size();
  BucketKey k;
  auto group = number_after(key, "dp_group_idx_", at);
  if (!group) return std::nullopt;
  auto gbuf = number_after(key, ".gbuf_idx_", at);
  if (!gbuf) return std::nullopt;
  if (key.compare(at, 8, ".dtype_(") != 0) return std::nullopt;
  const size_t close = key.find(").bucket_idx_", at);
  if (close == std::string::npos) return std::nullopt;
  const std::string pair = key.substr(at + 8, close - at - 8);  // "torch.bfloat16, torch.float32"
  k.dtypes = pair;
  k.param_dtype = pair.substr(0, pair.find(','));
  at = close + 1;
  auto bucket = number_after(key, ".bucket_idx_", at);
  if (!bucket || at >= key.size() || key[at] != '.') return std::nullopt;
  k.group = *group;
  k.gbuf = *gbuf;
  k.bucket = *bucket;
  k.state = key.substr(at + 1);
  return k;
}

size_t chained_prefix_length(const std::string& key) {
  size_t at = 0;
  if (!number_after(key, "chained_", at) || at >= key.size() || key[at] != '.') return 0;
  return at + 1;
}

bool is_bucket_space_key(const std::string& key) {
  return key.compare(chained_prefix_length(key), std::string(kBucketPrefix).size(), kBucketPrefix) == 0;
}

bool is_bucket_state_key(const std::string& key) {
  return is_bucket_space_key(key) && key.find(".bucket_idx_") != std::string::npos;
}

bool is_chained_bucket_key(const std::string& key) {
  const std::string prefix = kBucketPrefix;
  if (key.rfind(prefix + "chained_", 0) == 0) return true;  // the prefix inside, before megatron-core 0.16
  return chained_prefix_length(key) > 0 && is_bucket_space_key(key);
}

std::vector<std::pair<int64_t, int64_t>> BucketGroup::gaps(int b) const {
  std::vector<std::pair<int64_t, int64_t>> taken;
  for (const auto& s : slots)
    if (s.bucket == b) taken.push_back({s.start, s.start + s.numel});
  std::sort(taken.begin(), taken.end());
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t at = 0;
  for (const auto& [s, e] : taken) {
    if (s > at) out.push_back({at, s});
    at = std::max(at, e);
  }
  const int64_t size = buckets[static_cast<size_t>(b)]->size[0];
  if (at < size) out.push_back({at, size});
  return out;
}

std::vector<std::string> stored_key_order(const dcp::Metadata& md) {
  if (!md.merged_from.empty())
    throw Error(ErrorKind::Unsupported, md.path, "state_dict_metadata",
                "per-rank metadata files hold no single key order");
  std::vector<const dcp::Entry*> stored;
  stored.reserve(md.entries.size());
  for (const auto& e : md.entries) stored.push_back(&e);
  std::sort(stored.begin(), stored.end(),
            [](const auto* a, const auto* b) { return a->stored_index < b->stored_index; });
  std::vector<std::string> out;
  out.reserve(stored.size());
  for (const auto* e : stored) out.push_back(e->key);
  return out;
}

BucketMap map_buckets(const dcp::Metadata& md, const std::vector<std::string>& key_order) {
  BucketMap m;
  // group -> gbuf -> param dtype -> bucket -> the `param` tensor
  std::map<int, std::map<int, std::map<std::string, std::map<int, const dcp::Entry*>>>> found;
  for (const auto& e : md.entries) {
    if (is_chained_bucket_key(e.key)) {
      m.bucket_space = true;
      m.refused.push_back(
          "a ChainedOptimizer's buckets (chained_<i>.optimizer.distributed.*: the dense and the expert "
          "DistributedOptimizers of a mixture-of-experts model, or several optimizers) are not mapped");
      return m;
    }
    if (e.key.rfind(kBucketPrefix, 0) != 0) continue;
    m.bucket_space = true;
    const auto k = parse_bucket_key(e.key);
    if (!k || (k->state != "param" && k->state != "master_param")) continue;
    if (e.kind != dcp::EntryKind::Tensor || e.dtype != "float32" || e.size.size() != 1) {
      m.refused.push_back(e.key + ": not a 1-D float32 tensor");
      return m;
    }
    m.state = k->state;
    found[k->group][k->gbuf][k->param_dtype][k->bucket] = &e;
  }
  if (!m.bucket_space || found.empty()) return m;

  // The model keys in stored order, and tp: the number of pieces a cut key is cut into.
  std::vector<const dcp::Entry*> model;
  std::set<size_t> tps;
  try {
    for (const auto& key : key_order) {
      const auto* e = md.find(key);
      if (!e || e->kind != dcp::EntryKind::Tensor || key.rfind("optimizer.", 0) == 0 ||
          key.find("_extra_state") != std::string::npos)
        continue;
      const auto axes = cut_axes(*e);
      if (axes.size() > 1) throw Refusal{key + " is cut along more than one axis"};
      if (!axes.empty()) tps.insert(axes[0].second.size());
      model.push_back(e);
    }
    if (tps.size() > 1) throw Refusal{"the model keys are cut into different numbers of tensor ranks"};
  } catch (const Refusal& r) {
    m.refused.push_back(r.why);
    return m;
  }
  m.tp = tps.empty() ? 1 : static_cast<int>(*tps.begin());
  const int groups = found.rbegin()->first + 1;
  if (static_cast<int>(found.size()) != groups || groups % m.tp != 0) {
    m.refused.push_back(std::to_string(found.size()) + " dp_group_idx groups (highest " +
                        std::to_string(groups - 1) + ") are not tp " + std::to_string(m.tp) +
                        " x a pipeline size");
    return m;
  }
  m.pp = groups / m.tp;

  // Several gbufs in every group, each of one and the same dtype pair: a virtual pipeline, one gbuf per model
  // chunk (gbuf_idx counts the chunks' buffers in chunk order, docs/megatron-bucket-layout.md step 9).
  std::set<size_t> gbuf_counts;
  std::set<std::string> gbuf_dtypes;  // each gbuf's param dtypes, joined
  for (const auto& [gi, gbufs] : found) {
    gbuf_counts.insert(gbufs.size());
    for (const auto& [gb, dtypes] : gbufs) {
      std::string joined;
      for (const auto& [dtype, buckets] : dtypes) joined += dtype + ";";
      gbuf_dtypes.insert(joined);
    }
  }
  const bool chunks = m.pp > 1 && gbuf_counts.size() == 1 && gbuf_dtypes.size() == 1;
  const int vpp = chunks ? static_cast<int>(*gbuf_counts.begin()) : 1;
  m.vpp = vpp;

  for (const auto& [gi, gbufs] : found) {
    if (vpp == 1 && gbufs.size() != 1) {
      m.refused.push_back(
          "dp_group_idx_" + std::to_string(gi) +
          ": several grad buffers (virtual pipeline chunks, experts or mixed param dtypes) are "
          "not mapped");
      continue;
    }
    for (const auto& [gb, dtypes] : gbufs) {
      const std::string label =
          "dp_group_idx_" + std::to_string(gi) + (vpp > 1 ? ".gbuf_idx_" + std::to_string(gb) : "");
      try {
        if (dtypes.size() != 1) throw Refusal{"several param dtypes in one grad buffer are not mapped"};
        if (gb < 0 || gb >= vpp) throw Refusal{"gbuf_idx " + std::to_string(gb) + " out of order"};
        const auto& [dtype, buckets] = *dtypes.begin();
        const auto lp = dtype_from_name(dtype);
        if (!lp || (*lp != DType::BF16 && *lp != DType::F16))
          throw Refusal{"param dtype " + dtype + " (bf16 and fp16 mains are compared)"};
        BucketGroup g;
        g.index = gi;
        g.gbuf = gb;
        g.tp_rank = gi % m.tp;
        g.pp_rank = gi / m.tp;
        g.lp = *lp;
        std::vector<int64_t> sizes;
        for (const auto& [b, e] : buckets) {
          if (b != static_cast<int>(g.buckets.size()))
            throw Refusal{"bucket_idx " + std::to_string(b) + " out of order"};
          g.buckets.push_back(e);
          sizes.push_back(e->size[0]);
        }
        std::vector<const dcp::Entry*> mine;
        for (const auto* e : model)
          if (dtype_from_name(e->dtype) == lp) mine.push_back(e);
        g.slots = walk(rank_params(mine, m.tp, g.tp_rank, m.pp, g.pp_rank, vpp, gb), sizes);
        check_cuts(g);
        m.groups.push_back(std::move(g));
      } catch (const Refusal& r) {
        m.refused.push_back(label + ": " + r.why);
      }
    }
  }
  return m;
}

}  // namespace ckptdoc::megatron
