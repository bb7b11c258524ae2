// Checks 5 and 6 of a bucket-space save and the NaN/Inf by param (see bucket_checks.h).
#include "bucket_checks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "bucket_padding.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/short_list.h"
#include "main_params.h"

namespace ckptdoc::megatron {
namespace {

constexpr const char* kBucketPrefix = "optimizer.distributed.";
constexpr int64_t kMostDp = 4096;  // the data-parallel sizes tried when no bucket's shards show it

// A bucket key up to ".bucket_idx_<b>" (the part its param, exp_avg and exp_avg_sq share).
std::string bucket_base(const std::string& key) {
  return key.substr(0, key.rfind('.'));
}

std::string range_text(int64_t begin, int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// The mapped group and bucket whose tensors share `e`'s base; nullptr when `e` is no mapped bucket's.
const BucketGroup* group_of(const BucketMap& map, const dcp::Entry& e, int& bucket) {
  const auto k = parse_bucket_key(e.key);
  if (!k) return nullptr;
  for (const auto& g : map.groups)
    for (size_t b = 0; b < g.buckets.size(); ++b)
      if (g.chained == k->chained && g.index == k->group &&
          bucket_base(g.buckets[b]->key) == bucket_base(e.key)) {
        bucket = static_cast<int>(b);
        return &g;
      }
  return nullptr;
}

bool inside_a_gap(const std::vector<std::pair<int64_t, int64_t>>& gaps, int64_t begin, int64_t end) {
  return std::any_of(gaps.begin(), gaps.end(),
                     [&](const auto& g) { return g.first <= begin && end <= g.second; });
}

// Calls f(slot index, offset into the chunk, count) for each part of chunk [at, at + n) that a slot of
// bucket b covers.
template <class F>
void for_each_slot_part(const BucketGroup& g, int b, int64_t at, int64_t n, F&& f) {
  for (size_t i = 0; i < g.slots.size(); ++i) {
    const auto& s = g.slots[i];
    if (s.bucket != b) continue;
    const int64_t begin = std::max(at, s.start), end = std::min(at + n, s.start + s.numel);
    if (begin < end) f(i, begin - at, end - begin);
  }
}

// A per_bucket_numel[_unpadded] object of one dp group: for each gbuf, "<param dtype>, <grad dtype>" -> the
// buckets' sizes. megatron-core saves [{(param_dtype, grad_dtype): [n_bucket0, ...]}, ...] per gbuf, which a
// ShardedObject wraps in a list (distrib_optimizer.py:552-567).
using BucketSizes = std::vector<std::map<std::string, std::vector<int64_t>>>;

std::string dtype_text(const Value& v) {
  if (v.is(Value::Kind::DType)) return "torch." + v.as_str();
  if (v.is(Value::Kind::Global)) return v.as_global().first + "." + v.as_global().second;
  return v.repr(40);
}

std::optional<BucketSizes> bucket_sizes_of(const Value& object) {
  const Value* root = &object;
  if (root->is_sequence() && root->items().size() == 1 && root->items()[0].is_sequence())
    root = &root->items()[0];
  if (!root->is_sequence()) return std::nullopt;
  BucketSizes out;
  for (const auto& gbuf : root->items()) {
    if (!gbuf.is_dict()) return std::nullopt;
    auto& sizes = out.emplace_back();
    for (const auto& [k, v] : gbuf.as_dict().items) {
      if (!k.is_sequence() || k.items().size() != 2 || !v.is_sequence()) return std::nullopt;
      auto& list = sizes[dtype_text(k.items()[0]) + ", " + dtype_text(k.items()[1])];
      for (const auto& n : v.items()) {
        if (!n.is(Value::Kind::Int)) return std::nullopt;
        list.push_back(n.as_int());
      }
    }
  }
  return out;
}

// The sizes `sizes` lists for gbuf `gbuf` and dtype pair `dtypes`; nullptr when none.
const std::vector<int64_t>* list_of(const BucketSizes& sizes, int gbuf, const std::string& dtypes) {
  const auto g = static_cast<size_t>(gbuf);
  if (g >= sizes.size()) return nullptr;
  const auto it = sizes[g].find(dtypes);
  return it == sizes[g].end() ? nullptr : &it->second;
}

// The object `[chained_<c>.]optimizer.distributed.dp_group_idx_<i>.<name>/shard_*`, read; nullopt (with why)
// when absent.
std::optional<BucketSizes> read_sizes(const dcp::Checkpoint& ckpt, int chained, int group,
                                      const std::string& name, const dcp::Entry*& entry, std::string& why) {
  const std::string prefix = (chained >= 0 ? "chained_" + std::to_string(chained) + "." : std::string()) +
                             kBucketPrefix + std::string("dp_group_idx_") + std::to_string(group) + "." +
                             name + "/";
  entry = nullptr;
  for (const auto& e : ckpt.metadata().entries)
    if (e.key.rfind(prefix, 0) == 0 && e.kind == dcp::EntryKind::Bytes && e.bytes_item) {
      entry = &e;
      break;
    }
  if (!entry) {
    why = "no " + prefix + "shard_* object";
    return std::nullopt;
  }
  try {
    auto sizes = bucket_sizes_of(ckpt.open_item(*entry->bytes_item).root);
    if (!sizes) why = entry->key + " is not a list of {(param dtype, grad dtype): [bucket sizes]}";
    return sizes;
  } catch (const Error& err) {  // the DCP diagnosis names the damaged item
    why = err.what();
    return std::nullopt;
  }
}

}  // namespace

std::optional<NonfinitePlaces> nonfinite_places(const dcp::Checkpoint& ckpt, const BucketMap& map,
                                                const dcp::Entry& e) {
  if (e.kind != dcp::EntryKind::Tensor) return std::nullopt;
  NonfinitePlaces out;
  std::map<std::string, uint64_t> by_name;
  std::vector<std::string> order;
  auto count = [&](const std::string& name, const float* v, int64_t n) {
    uint64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(v[i]);
    if (bad == 0) return;
    if (!by_name.contains(name)) order.push_back(name);
    by_name[name] += bad;
  };
  int b = 0;
  if (const BucketGroup* g = group_of(map, e, b); g && e.size.size() == 1) {
    out.bucket = true;
    const auto gaps = g->gaps(b);
    for (const auto& [begin, end] : gaps) out.gap_elements += end - begin;
    for (const auto& chunk : e.chunks) {
      const int64_t at = chunk.offsets[0], n = chunk.sizes[0];
      if (inside_a_gap(gaps, at, at + n)) continue;
      const auto values = ckpt.read_chunk(e, chunk).to_float();
      for_each_slot_part(*g, b, at, n, [&](size_t i, int64_t from, int64_t len) {
        count(bucket_param_name(map, *g, g->slots[i]), values.data() + from, len);
      });
    }
  } else {
    // a weight: each chunk the map gives a param (a layer, a tensor rank) read once, named by its first param
    std::map<const dcp::Chunk*, std::string> chunks;
    std::vector<const dcp::Chunk*> in_order;
    for (const auto& grp : map.groups)
      for (const auto& s : grp.slots)
        if (s.weight == &e && chunks.emplace(s.chunk, s.name).second) in_order.push_back(s.chunk);
    if (in_order.empty()) return std::nullopt;
    for (const auto* chunk : in_order) {
      const auto values = ckpt.read_chunk(e, *chunk).to_float();
      count(chunks[chunk], values.data(), static_cast<int64_t>(values.size()));
    }
  }
  for (const auto& name : order) {
    out.params.emplace_back(name, by_name[name]);
    out.in_params += by_name[name];
  }
  return out;
}

BucketCheck check_second_moments(const dcp::Checkpoint& ckpt, const BucketMap& map,
                                 const std::vector<dcp::TensorSummary>& read) {
  BucketCheck out;
  std::map<std::string, const dcp::TensorSummary*> summary;
  for (const auto& t : read) summary[t.key] = &t;
  for (const auto& g : map.groups)
    for (size_t b = 0; b < g.buckets.size(); ++b) {
      const int bucket = static_cast<int>(b);
      const std::string key = bucket_base(g.buckets[b]->key) + ".exp_avg_sq";
      const auto* e = ckpt.metadata().find(key);
      size_t slots = 0;
      for (const auto& s : g.slots) slots += s.bucket == bucket;
      if (!e || e->kind != dcp::EntryKind::Tensor || e->size.size() != 1 ||
          e->size[0] != g.buckets[b]->size[0]) {
        out.not_checked.push_back("exp_avg_sq of " + std::to_string(slots) + " params: " + key +
                                  (e ? " is not a tensor of its bucket's size" : " is absent"));
        continue;
      }
      const auto it = summary.find(key);
      if (it != summary.end() && it->second->elements_read == it->second->numel &&
          it->second->negative == 0) {
        out.judged += slots;  // read whole by the DCP diagnosis, nothing negative anywhere
        continue;
      }
      // negative values somewhere (perhaps only in the gaps), or a chunk not read: each slot's part again
      const auto gaps = g.gaps(bucket);
      std::vector<uint64_t> negative(g.slots.size(), 0);
      std::vector<bool> unread(g.slots.size(), false);
      std::vector<std::string> file(g.slots.size());
      for (const auto& chunk : e->chunks) {
        const int64_t at = chunk.offsets[0], n = chunk.sizes[0];
        if (inside_a_gap(gaps, at, at + n)) continue;
        std::vector<float> values;
        try {
          values = ckpt.read_chunk(*e, chunk).to_float();
        } catch (const Error&) {  // the DCP diagnosis names the damaged item
          for_each_slot_part(g, bucket, at, n, [&](size_t i, int64_t, int64_t) { unread[i] = true; });
          continue;
        }
        for_each_slot_part(g, bucket, at, n, [&](size_t i, int64_t from, int64_t len) {
          const auto bad = static_cast<uint64_t>(std::count_if(
              values.begin() + from, values.begin() + from + len, [](float v) { return v < 0; }));
          if (bad && file[i].empty() && chunk.item) file[i] = chunk.item->file;
          negative[i] += bad;
        });
      }
      for (size_t i = 0; i < g.slots.size(); ++i) {
        const auto& s = g.slots[i];
        if (s.bucket != bucket) continue;
        if (unread[i]) {
          out.not_checked.push_back("exp_avg_sq of " + bucket_param_name(map, g, s) + ": a chunk of " + key +
                                    " could not be read");
          continue;
        }
        ++out.judged;
        if (negative[i] == 0) continue;
        const std::string name = bucket_param_name(map, g, s);
        std::string message = "'" + name + "': exp_avg_sq holds " + std::to_string(negative[i]) +
                              " negative of " + std::to_string(s.numel) + " values (its slice " +
                              range_text(s.start, s.start + s.numel) + " of ";
        message += key;
        message +=
            "), impossible for Adam's running mean of squared gradients (the state was damaged or written by "
            "something else); the next step takes its square root and can write NaN into the weights. "
            "Restart "
            "the optimizer state (`ckptdoc repair PATH -o NEW --reset-optimizer`), or resume from an earlier "
            "checkpoint";
        auto p = dcp::problem(model::Code::DcpMomentsNegative, std::move(message), file[i], key);
        p.params = {name};
        p.evidence = {{"negative", static_cast<double>(negative[i])},
                      {"numel", static_cast<double>(s.numel)}};
        out.problems.push_back(std::move(p));
      }
    }
  return out;
}

BucketCheck check_bucket_sizes(const dcp::Checkpoint& ckpt) {
  BucketCheck out;
  // (optimizer: chained_<c>. or -1, group) -> gbuf -> dtype pair -> bucket -> state -> size (1-D tensors)
  using Group = std::pair<int, int>;
  std::map<Group, std::map<int, std::map<std::string, std::map<int, std::map<std::string, int64_t>>>>>
      tensors;
  // (optimizer, group) -> its 1-D bucket tensors (their chunks show the data-parallel size)
  std::map<Group, std::vector<std::pair<const dcp::Entry*, BucketKey>>> shards;
  for (const auto& e : ckpt.metadata().entries) {
    const auto k = parse_bucket_key(e.key);
    if (!k || e.kind != dcp::EntryKind::Tensor) continue;
    const Group at{k->chained, k->group};
    tensors[at][k->gbuf][k->dtypes][k->bucket][k->state] = e.size.size() == 1 ? e.size[0] : -1;
    if (e.size.size() == 1) shards[at].emplace_back(&e, *k);
  }
  for (const auto& [group, gbufs] : tensors) {
    const auto [chained, index] = group;
    const std::string label = group_label(chained, index);
    const dcp::Entry *unpadded_entry = nullptr, *padded_entry = nullptr;
    std::string why;
    const auto unpadded = read_sizes(ckpt, chained, index, "per_bucket_numel_unpadded", unpadded_entry, why);
    const auto padded =
        unpadded ? read_sizes(ckpt, chained, index, "per_bucket_numel", padded_entry, why) : std::nullopt;
    if (!unpadded || !padded) {
      std::string line = "the bucket sizes of " + label + ": ";
      line += why;
      out.not_checked.push_back(line);
      continue;
    }
    ++out.groups;
    // the padded size of bucket b of gbuf g, dtype pair d; -1 when per_bucket_numel lists none
    auto padded_of = [&](int gbuf, const std::string& dtypes, int b) -> int64_t {
      const auto* list = list_of(*padded, gbuf, dtypes);
      return list && static_cast<size_t>(b) < list->size() ? (*list)[static_cast<size_t>(b)] : -1;
    };
    std::optional<int64_t> dp;  // from the first bucket that more than one DP rank wrote
    for (const auto& [e, k] : shards[group])
      if (const int64_t p = padded_of(k.gbuf, k.dtypes, k.bucket); p > 0 && !dp) dp = dp_from_shards(*e, p);
    std::vector<std::string> wrong, padding_wrong;  // the latter: per_bucket_numel alone
    for (const auto& [gbuf, pairs] : gbufs)
      for (const auto& [dtypes, buckets] : pairs) {
        const std::string where = "gbuf_idx_" + std::to_string(gbuf) + " dtype_(" + dtypes + ")";
        const auto* listed = list_of(*unpadded, gbuf, dtypes);
        if (!listed) {
          wrong.push_back(where + " has bucket tensors that per_bucket_numel_unpadded does not list");
          continue;
        }
        const auto& sizes = *listed;
        const auto* pad = list_of(*padded, gbuf, dtypes);
        if (buckets.size() != sizes.size() || buckets.rbegin()->first + 1 != static_cast<int>(sizes.size()))
          wrong.push_back(where + ": per_bucket_numel_unpadded lists " + std::to_string(sizes.size()) +
                          " buckets, the save holds bucket tensors " +
                          std::to_string(buckets.begin()->first) + ".." +
                          std::to_string(buckets.rbegin()->first));
        std::set<std::string> states;
        for (const auto& [b, by_state] : buckets)
          for (const auto& [state, n] : by_state) states.insert(state);
        for (const auto& [b, by_state] : buckets) {
          const auto at = static_cast<size_t>(b);
          if (at >= sizes.size()) continue;
          ++out.judged;
          for (const auto& state : states) {
            const auto n = by_state.find(state);
            std::string said = where + " bucket_idx_" + std::to_string(b);
            if (n == by_state.end()) {
              said += " has no ";
              said += state;
              wrong.push_back(said + " tensor");
            } else if (n->second != sizes[at]) {
              said += ".";
              said += state;
              said += " holds " + std::to_string(n->second) +
                      " elements where per_bucket_numel_unpadded says " + std::to_string(sizes[at]);
              wrong.push_back(said);
            }
          }
          const int64_t p = pad && at < pad->size() ? (*pad)[at] : -1;
          // dp unknown (each bucket in one DP rank's shard): any dp whose first shard holds the bucket
          bool padded_right = dp && padded_by_megatron(p, sizes[at], *dp);
          for (int64_t d = 1; !dp && !padded_right && d <= kMostDp && sizes[at] * d <= p; ++d)
            padded_right = padded_by_megatron(p, sizes[at], d);
          if (!padded_right) {
            std::string said = where + " bucket_idx_" + std::to_string(b) + ": per_bucket_numel " +
                               (p >= 0 ? std::to_string(p) : std::string("lists none")) +
                               " is not its unpadded " + std::to_string(sizes[at]) +
                               " padded as megatron-core pads a bucket (";
            said += dp ? "to a multiple of lcm(dp " + std::to_string(*dp) +
                             ", 128) = " + std::to_string(bucket_divisor(*dp)) +
                             ", dp read from its DP shards' cuts)"
                       : std::string("to a multiple of lcm(dp, 128) for any dp whose first shard holds it)");
            padding_wrong.push_back(said);
          }
        }
      }
    if (wrong.empty() && padding_wrong.empty()) continue;
    if (wrong.empty()) {
      // per_bucket_numel alone: megatron-core's load does not read it, but megatron-core at this dp never
      // writes it so
      std::string message = label + "'s per_bucket_numel is not what megatron-core writes: ";
      message += short_list(padding_wrong, 4, "; ");
      message +=
          ". megatron-core's load reads per_bucket_numel_unpadded alone, so it still loads this state, but "
          "this object was not written by megatron-core's DistributedOptimizer at this data-parallel size "
          "(damaged, or written by something else)";
      auto p = dcp::problem(model::Code::LayoutMismatch, model::Severity::Warning, std::move(message),
                            padded_entry->bytes_item->file, padded_entry->key);
      p.evidence = {{"disagreements", static_cast<double>(padding_wrong.size())}};
      out.problems.push_back(std::move(p));
      continue;
    }
    wrong.insert(wrong.end(), padding_wrong.begin(), padding_wrong.end());
    std::string list;
    for (size_t i = 0; i < wrong.size() && i < 4; ++i) list += (i ? "; " : "") + wrong[i];
    if (wrong.size() > 4) list += "; and " + std::to_string(wrong.size() - 4) + " more";
    std::string message = label + "'s bucket layout disagrees with itself: ";
    message += list;
    message +=
        ". megatron-core's load of this optimizer state asserts that per_bucket_numel_unpadded is the layout "
        "it "
        "rebuilds from the model and reads each bucket tensor at that size, so it cannot load this state; "
        "where each param's main and moments lie in the buckets cannot be trusted either";
    auto p = dcp::problem(model::Code::LayoutMismatch, std::move(message), unpadded_entry->bytes_item->file,
                          unpadded_entry->key);
    p.evidence = {{"disagreements", static_cast<double>(wrong.size())}};
    out.problems.push_back(std::move(p));
  }
  return out;
}

}  // namespace ckptdoc::megatron
