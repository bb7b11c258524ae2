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

// A mixture-of-experts layer's expert param: decoder.layers.*.experts.*, axis 1 the global expert
// (SequentialMLP.sharded_state_dict prepends it: one chunk per layer and expert, transformer/moe/experts.py).
bool is_expert_key(const dcp::Entry& e) {
  return layer_stacked(e.key) && e.key.find(".experts.") != std::string::npos && e.size.size() >= 2;
}

// A key of the optimizer's state (optimizer.*, or a ChainedOptimizer's chained_<i>.optimizer.*).
bool is_optimizer_state_key(const std::string& key) {
  return key.compare(chained_prefix_length(key), 10, "optimizer.") == 0;
}

// The global experts [first, first + local) of one expert rank (ep rank j holds j * E/ep onwards:
// local_expert_indices_offset in transformer/moe/experts.py).
struct ExpertRank {
  int64_t first = 0, local = 0;
};

// One model key's chunks as one model-parallel rank holds them: by layer (stacked keys) or the one chunk.
struct KeyChunks {
  const dcp::Entry* entry = nullptr;
  // stacked: layer -> this tensor rank's chunk, or for an expert key the chunks of the rank's local experts
  std::map<int64_t, std::vector<const dcp::Chunk*>> by_layer;
  const dcp::Chunk* whole = nullptr;  // not stacked: this tp rank's chunk
};

// The axis a key is cut along across tensor ranks (not the layer axis, nor an expert key's expert axis), with
// its distinct offsets.
std::vector<std::pair<size_t, std::vector<int64_t>>> cut_axes(const dcp::Entry& e) {
  std::vector<std::pair<size_t, std::vector<int64_t>>> out;
  for (size_t ax = is_expert_key(e) ? 2 : layer_stacked(e.key) ? 1 : 0; ax < e.size.size(); ++ax) {
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

KeyChunks chunks_of_rank(const dcp::Entry& e, int tp, int tp_rank, const ExpertRank* ex) {
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
  if (ex) {
    for (const auto* c : mine) {
      if (c->sizes[0] != 1 || c->sizes[1] != 1)
        throw Refusal{e.key + ": a chunk that is not one layer of one expert of one tensor rank"};
      const int64_t x = c->offsets[1] - ex->first;
      if (x < 0 || x >= ex->local) continue;  // another expert rank's
      auto& local = k.by_layer[c->offsets[0]];
      local.resize(static_cast<size_t>(ex->local));
      if (local[static_cast<size_t>(x)])
        throw Refusal{e.key + ": two chunks of one layer and expert of one tensor rank"};
      local[static_cast<size_t>(x)] = c;
    }
  } else if (layer_stacked(e.key)) {
    for (const auto* c : mine) {
      if (e.size.empty() || c->sizes[0] != 1 || !k.by_layer.emplace(c->offsets[0], std::vector{c}).second)
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
// With `ex` (an expert rank; `keys` its expert keys alone): each layer's local experts in order, each
// expert's keys in key order (SequentialMLP's local_experts.<j>, the expert buffer holding nothing else).
std::vector<BucketSlot> rank_params(const std::vector<const dcp::Entry*>& keys, int tp, int tp_rank, int pp,
                                    int pp_rank, int vpp, int vp_rank, const ExpertRank* ex = nullptr) {
  std::vector<KeyChunks> before, layers, after;
  std::set<int64_t> layer_ids;
  for (const auto* e : keys) {
    auto k = chunks_of_rank(*e, tp, tp_rank, ex);
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
  const size_t per_layer = ex ? static_cast<size_t>(ex->local) : 1;
  for (const int64_t l : ids)
    for (size_t x = 0; x < per_layer; ++x)
      for (const auto& k : layers) {
        const auto it = k.by_layer.find(l);
        if (it == k.by_layer.end() || x >= it->second.size() || !it->second[x])
          throw Refusal{k.entry->key + " has no chunk for layer " + std::to_string(l) +
                        (ex ? ", expert " + std::to_string(ex->first + static_cast<int64_t>(x)) : "")};
        std::string rest = k.entry->key.substr(std::string("decoder.layers.").size());
        if (ex) {  // the global expert after the last "experts."
                   // (decoder.layers.<l>.mlp.experts.experts.<x>.)
          const size_t at = rest.rfind("experts.") + std::string("experts.").size();
          rest.insert(at, std::to_string(ex->first + static_cast<int64_t>(x)) + ".");
        }
        add(k, *it->second[x], "decoder.layers." + std::to_string(l) + "." + rest);
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
  const size_t chained = chained_prefix_length(key);
  if (key.compare(chained, std::string(kBucketPrefix).size(), kBucketPrefix) != 0) return std::nullopt;
  size_t at = chained + std::string(kBucketPrefix).size();
  BucketKey k;
  if (chained > 0) k.chained = std::stoi(key.substr(8, chained - 9));  // "chained_<c>."
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

std::string group_label(int chained, int group) {
  return (chained >= 0 ? "chained_" + std::to_string(chained) + "." : std::string()) + "dp_group_idx_" +
         std::to_string(group);
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

namespace {

// group -> gbuf -> param dtype -> bucket -> the `param` tensor, of one optimizer
using Groups = std::map<int, std::map<int, std::map<std::string, std::map<int, const dcp::Entry*>>>>;

// Group g's one gbuf: its dtype, the bucket tensors in order and their sizes.
std::vector<int64_t> open_group(const std::map<std::string, std::map<int, const dcp::Entry*>>& dtypes,
                                BucketGroup& g) {
  if (dtypes.size() != 1) throw Refusal{"several param dtypes in one grad buffer are not mapped"};
  const auto& [dtype, buckets] = *dtypes.begin();
  const auto lp = dtype_from_name(dtype);
  if (!lp || (*lp != DType::BF16 && *lp != DType::F16))
    throw Refusal{"param dtype " + dtype + " (bf16 and fp16 mains are compared)"};
  g.lp = *lp;
  std::vector<int64_t> sizes;
  for (const auto& [b, e] : buckets) {
    if (b != static_cast<int>(g.buckets.size()))
      throw Refusal{"bucket_idx " + std::to_string(b) + " out of order"};
    g.buckets.push_back(e);
    sizes.push_back(e->size[0]);
  }
  return sizes;
}

std::vector<const dcp::Entry*> of_dtype(const std::vector<const dcp::Entry*>& keys, DType lp) {
  std::vector<const dcp::Entry*> out;
  for (const auto* e : keys)
    if (dtype_from_name(e->dtype) == lp) out.push_back(e);
  return out;
}

// The dense optimizer's groups (the only optimizer, or chained_<c>. of a ChainedOptimizer): one per tensor x
// pipeline rank, a virtual pipeline's chunks each a gbuf. False (with why in m.refused) when the groups are
// not tp x a pipeline size.
bool map_dense(BucketMap& m, int c, const Groups& found, const std::vector<const dcp::Entry*>& model) {
  const std::string opt = c >= 0 ? "chained_" + std::to_string(c) + ".'s " : "";
  const int groups = found.rbegin()->first + 1;
  if (static_cast<int>(found.size()) != groups || groups % m.tp != 0) {
    m.refused.push_back(opt + std::to_string(found.size()) + " dp_group_idx groups (highest " +
                        std::to_string(groups - 1) + ") are not tp " + std::to_string(m.tp) +
                        " x a pipeline size");
    return false;
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
      m.refused.push_back(group_label(c, gi) +
                          ": several grad buffers (virtual pipeline chunks, experts or mixed param dtypes) "
                          "are not mapped");
      continue;
    }
    for (const auto& [gb, dtypes] : gbufs) {
      const std::string label = group_label(c, gi) + (vpp > 1 ? ".gbuf_idx_" + std::to_string(gb) : "");
      try {
        if (gb < 0 || gb >= vpp) throw Refusal{"gbuf_idx " + std::to_string(gb) + " out of order"};
        BucketGroup g;
        g.chained = c;
        g.index = gi;
        g.gbuf = gb;
        g.tp_rank = gi % m.tp;
        g.pp_rank = gi / m.tp;
        const auto sizes = open_group(dtypes, g);
        g.slots = walk(rank_params(of_dtype(model, g.lp), m.tp, g.tp_rank, m.pp, g.pp_rank, vpp, gb), sizes);
        check_cuts(g);
        m.groups.push_back(std::move(g));
      } catch (const Refusal& r) {
        m.refused.push_back(label + ": " + r.why);
      }
    }
  }
  return true;
}

// The expert optimizer's groups (chained_<c>.): dp_group_idx is the rank in the expert tensor x expert x
// pipeline group (optimizer/__init__.py: data_parallel_group_idx = the rank in expt_tp_pp_group, built from
// the 'tp-ep-pp' ranks, tensor rank fastest), each group's one buffer its expert rank's experts alone.
void map_experts(BucketMap& m, int c, const Groups& found, const std::vector<const dcp::Entry*>& experts) {
  const std::string opt = "chained_" + std::to_string(c) + ".'s ";
  const int groups = found.rbegin()->first + 1;
  const int per_ep = m.etp * m.pp;
  if (static_cast<int>(found.size()) != groups || groups % per_ep != 0 ||
      m.experts % (groups / per_ep) != 0) {
    m.refused.push_back(opt + std::to_string(found.size()) + " dp_group_idx groups (highest " +
                        std::to_string(groups - 1) + ") of the expert optimizer are not expert tensor size " +
                        std::to_string(m.etp) + " x pipeline size " + std::to_string(m.pp) +
                        " x an expert size that divides " + std::to_string(m.experts) + " experts");
    return;
  }
  m.ep = groups / per_ep;
  const int64_t local = m.experts / m.ep;
  for (const auto& [gi, gbufs] : found) {
    try {
      if (m.vpp > 1) throw Refusal{"experts under a virtual pipeline are not mapped"};
      if (gbufs.size() != 1)
        throw Refusal{"several grad buffers (virtual pipeline chunks or mixed param dtypes) are not mapped"};
      BucketGroup g;
      g.chained = c;
      g.expert = true;
      g.index = gi;
      g.gbuf = gbufs.begin()->first;
      g.tp_rank = gi % m.etp;
      g.ep_rank = gi / m.etp % m.ep;
      g.pp_rank = gi / (m.etp * m.ep);
      const auto sizes = open_group(gbufs.begin()->second, g);
      const ExpertRank ex{g.ep_rank * local, local};
      g.slots =
          walk(rank_params(of_dtype(experts, g.lp), m.etp, g.tp_rank, m.pp, g.pp_rank, 1, 0, &ex), sizes);
      check_cuts(g);
      m.groups.push_back(std::move(g));
    } catch (const Refusal& r) {
      m.refused.push_back(group_label(c, gi) + ": " + r.why);
    }
  }
}

}  // namespace

BucketMap map_buckets(const dcp::Metadata& md, const std::vector<std::string>& key_order) {
  BucketMap m;
  std::map<int, Groups> found;  // optimizer (chained_<c>., -1 for none) -> its groups
  for (const auto& e : md.entries) {
    if (e.key.rfind(std::string(kBucketPrefix) + "chained_", 0) == 0) {
      m.bucket_space = true;
      m.refused.push_back(
          "a ChainedOptimizer's buckets named optimizer.distributed.chained_<i>.* (megatron-core prefixes "
          "them chained_<i>.optimizer.distributed.*) are not mapped");
      return m;
    }
    if (!is_bucket_space_key(e.key)) continue;
    m.bucket_space = true;
    const auto k = parse_bucket_key(e.key);
    if (!k || (k->state != "param" && k->state != "master_param")) continue;
    if (e.kind != dcp::EntryKind::Tensor || e.dtype != "float32" || e.size.size() != 1) {
      m.refused.push_back(e.key + ": not a 1-D float32 tensor");
      return m;
    }
    m.state = k->state;
    found[k->chained][k->group][k->gbuf][k->param_dtype][k->bucket] = &e;
  }
  if (!m.bucket_space || found.empty()) return m;

  // The model keys in stored order, dense and expert, and tp (etp): the pieces a cut key is cut into.
  std::vector<const dcp::Entry*> dense, experts;
  std::set<size_t> tps, etps;
  std::set<int64_t> expert_counts;
  try {
    for (const auto& key : key_order) {
      const auto* e = md.find(key);
      if (!e || e->kind != dcp::EntryKind::Tensor || is_optimizer_state_key(key) ||
          key.find("_extra_state") != std::string::npos)
        continue;
      const auto axes = cut_axes(*e);
      if (axes.size() > 1) throw Refusal{key + " is cut along more than one axis"};
      const bool expert = is_expert_key(*e);
      if (!axes.empty()) (expert ? etps : tps).insert(axes[0].second.size());
      if (expert) expert_counts.insert(e->size[1]);
      (expert ? experts : dense).push_back(e);
    }
    if (tps.size() > 1) throw Refusal{"the model keys are cut into different numbers of tensor ranks"};
    if (etps.size() > 1) throw Refusal{"the expert keys are cut into different numbers of tensor ranks"};
    if (expert_counts.size() > 1) throw Refusal{"the expert keys hold different numbers of experts"};
  } catch (const Refusal& r) {
    m.refused.push_back(r.why);
    return m;
  }
  m.tp = tps.empty() ? 1 : static_cast<int>(*tps.begin());
  m.etp = etps.empty() ? 1 : static_cast<int>(*etps.begin());
  m.experts = expert_counts.empty() ? 0 : static_cast<int>(*expert_counts.begin());

  // Which optimizer holds which params. megatron-core chains several optimizers, prefixing each one's keys
  // chained_<c>. (optimizer.py, ChainedOptimizer.sharded_state_dict), when a model has expert params: the
  // dense optimizer(s) first, the expert optimizer last (optimizer/__init__.py, get_megatron_optimizer).
  int dense_at = -1, experts_at = -2;  // -2: no expert optimizer
  if (found.contains(-1)) {
    if (found.size() > 1) {
      m.refused.push_back("both chained_<i>. and unprefixed optimizer.distributed.* buckets: not mapped");
      return m;
    }
    if (!experts.empty()) {
      m.refused.push_back(
          "the model has expert params (decoder.layers.*.experts.*) and the buckets are not a "
          "ChainedOptimizer's (chained_<i>.optimizer.distributed.*: a dense and an expert optimizer): not "
          "mapped");
      return m;
    }
  } else {
    const int n = static_cast<int>(found.size());
    const int dense_n = experts.empty() ? n : n - 1;
    if (found.begin()->first != 0 || found.rbegin()->first != n - 1 || dense_n != 1) {
      m.refused.push_back("a ChainedOptimizer of " + plural(static_cast<size_t>(n), "optimizer") +
                          " (chained_" + std::to_string(found.begin()->first) + ". to chained_" +
                          std::to_string(found.rbegin()->first) + ".) for a model " +
                          (experts.empty() ? "without" : "with") +
                          " expert params: mapped are the optimizers chained_0. (dense) and, with expert "
                          "params, chained_1. (experts) alone");
      return m;
    }
    dense_at = 0;
    if (!experts.empty()) experts_at = 1;
  }
  if (!map_dense(m, dense_at, found[dense_at], dense)) return m;
  if (experts_at >= 0) map_experts(m, experts_at, found[experts_at], experts);
  return m;
}

}  // namespace ckptdoc::megatron
