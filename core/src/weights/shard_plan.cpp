// Shard assignment and index text of Hugging Face-style sharded weights (see weights/shards.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "ckptdoc/error.h"
#include "ckptdoc/weights/shards.h"

namespace ckptdoc::weights {

uint64_t parse_shard_size(const std::string& text, const std::string& option) {
  auto bad = [&](const std::string& why) -> Error {
    return Error("", option,
                 expected_found("a size such as 5GB (5e9 bytes), 5GiB (5*2^30) or 500MB", "'" + text + "'") +
                     (why.empty() ? "" : " (" + why + ")"));
  };
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t end = i;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
                               ((text[end] == 'e' || text[end] == 'E') && end + 1 < text.size() &&
                                (std::isdigit(static_cast<unsigned char>(text[end + 1])) ||
                                 text[end + 1] == '+' || text[end + 1] == '-')) ||
                               ((text[end] == '+' || text[end] == '-') && end > i &&
                                (text[end - 1] == 'e' || text[end - 1] == 'E'))))
    ++end;
  if (end == i) throw bad("no number");
  double value = 0;
  try {
    size_t used = 0;
    value = std::stod(text.substr(i, end - i), &used);
    if (used != end - i) throw bad("not a number");
  } catch (const std::logic_error&) {
    throw bad("not a number");
  }
  size_t unit_begin = end, unit_end = text.size();
  while (unit_begin < unit_end && std::isspace(static_cast<unsigned char>(text[unit_begin]))) ++unit_begin;
  while (unit_end > unit_begin && std::isspace(static_cast<unsigned char>(text[unit_end - 1]))) --unit_end;
  std::string unit;
  for (size_t k = unit_begin; k < unit_end; ++k)
    unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[k])));
  static const std::map<std::string, double> kUnits = {
      {"", 1},      {"B", 1},        {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12}, {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}, {"TIB", 1099511627776.0}};
  const auto u = kUnits.find(unit);
  if (u == kUnits.end()) throw bad("unknown unit '" + unit + "'");
  const double bytes = value * u->second;  // truncated like Python's int(value * multiplier)
  if (!(bytes >= 0) || bytes >= 1.8e19) throw bad("out of range");
  return static_cast<uint64_t>(bytes);
}

std::string weights_name(ShardFormat f) {
  return f == ShardFormat::Safetensors ? "model.safetensors" : "pytorch_model.bin";
}
std::string index_name(ShardFormat f) {
  return weights_name(f) + ".index.json";
}

namespace {

// "model-00002-of-00007.safetensors": the shard number and count zero-padded to five digits (or more).
std::string shard_file(ShardFormat f, size_t i, size_t n) {
  char digits[64];
  std::snprintf(digits, sizeof digits, "-%05zu-of-%05zu", i + 1, n);
  const std::string base = weights_name(f);
  const size_t dot = base.rfind('.');
  return base.substr(0, dot) + digits + base.substr(dot);
}

// What makes two tensors one storage for the splitter: the same storage object (zero_to_fp32's aliases share
// the owner's tensor), or zero bytes (all such torch tensors report data pointer 0).
const void* storage_key(const Tensor& t) {
  static const int kZeroBytes = 0;
  if (t.nbytes() == 0) return &kZeroBytes;
  return t.storage.get();
}

}  // namespace

ShardPlan plan_shards(const std::vector<NamedTensor>& tensors, uint64_t max_shard_size, ShardFormat format) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t current_size = 0;
  // Storages in first-seen order, each with the tensors on it (the first one is the one that was placed).
  std::vector<std::vector<size_t>> groups;
  std::map<const void*, size_t> group_of;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const void* key = storage_key(tensors[i].tensor);
    if (key) {
      const auto [it, fresh] = group_of.emplace(key, groups.size());
      if (!fresh) {
        groups[it->second].push_back(i);
        continue;
      }
      groups.push_back({i});
    }
    const uint64_t size = tensors[i].tensor.nbytes();
    if (size > max_shard_size) {  // its own shard, placed before the one being filled
      shards.push_back({i});
      continue;
    }
    if (current_size + size > max_shard_size) {
      shards.push_back(std::move(current));
      current.clear();
      current_size = 0;
    }
    current.push_back(i);
    current_size += size;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  for (const auto& g : groups) {
    if (g.size() < 2) continue;
    for (auto& s : shards) {
      if (std::find(s.begin(), s.end(), g.front()) == s.end()) continue;
      s.insert(s.end(), g.begin() + 1, g.end());
      break;
    }
  }

  ShardPlan plan;
  for (size_t k = 0; k < shards.size(); ++k) {
    ShardPlan::Shard s;
    s.file = shards.size() == 1 ? weights_name(format) : shard_file(format, k, shards.size());
    s.tensors = std::move(shards[k]);
    std::map<const void*, bool> stored;
    for (size_t i : s.tensors) {
      const Tensor& t = tensors[i].tensor;
      // torch.save writes a shared storage once; safetensors stores every entry's bytes.
      if (format == ShardFormat::Torch && !stored.emplace(storage_key(t), true).second) continue;
      s.bytes += t.nbytes();
    }
    plan.total_size += s.bytes;
    plan.shards.push_back(std::move(s));
  }
  return plan;
}

std::string index_json(const std::vector<NamedTensor>& tensors, const ShardPlan& plan) {
  nlohmann::json weight_map =
      nlohmann::json::object();  // std::map: sorted keys, as json.dumps(sort_keys=True)
  for (const auto& s : plan.shards)
    for (size_t i : s.tensors) weight_map[tensors[i].name] = s.file;
  nlohmann::json index = {{"metadata", {{"total_size", plan.total_size}}},
                          {"weight_map", std::move(weight_map)}};
  return index.dump(2, ' ', /*ensure_ascii=*/true) + "\n";
}

}  // namespace ckptdoc::weights
