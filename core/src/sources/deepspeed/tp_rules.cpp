// Tensor-parallel merge rules (tp_rules.h): from a checkpoint's universal_checkpoint_info or a JSON rule
// file, applied in the order ds_to_universal.py::merge_tp_slices applies them.
#include "ckptdoc/sources/deepspeed/tp_rules.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::deepspeed {

using namespace detail;

namespace {

constexpr const char* kReplicated = "tp_replicated_parameter_patterns";
constexpr const char* kAverage = "parameter_to_average_patterns";
constexpr const char* kRow = "parameter_with_row_parallelism_patterns";
constexpr const char* kVocab = "vocabulary_parameter_patterns";
constexpr const char* kSub2 = "parameter_with_2_sub_params_cat_dim_0";

// Python's re.match: anchored at the start, not at the end.
bool matches(const std::string& pattern, const std::string& name, const std::string& source) {
  try {
    const std::regex re(pattern, std::regex::ECMAScript);
    return std::regex_search(name, re, std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    throw Error(ErrorKind::InvalidRequest, source, "pattern '" + pattern + "'",
                std::string("not a regular expression ckptdoc can use: ") + e.what());
  }
}

// "'NAME' matches both 'A' and 'B'": a name two patterns claim.
std::string matched_twice(const std::string& name, const std::string& a, const std::string& b) {
  std::string m = "'";
  m += name;
  m += "' matches both '";
  m += a;
  m += "' and '";
  m += b;
  m += "'";
  return m;
}

// The one pattern of a list that matches (nullopt: none); two matching patterns are ambiguous.
std::optional<std::string> matched(const std::vector<std::string>& patterns, const std::string& name,
                                   const std::string& source, const char* list) {
  std::optional<std::string> hit;
  for (const auto& p : patterns) {
    if (!matches(p, name, source)) continue;
    if (hit) throw Error(ErrorKind::InvalidRequest, source, list, matched_twice(name, *hit, p));
    hit = p;
  }
  return hit;
}

std::vector<std::string> strings_of(const Value* v) {
  std::vector<std::string> out;
  if (v && v->is_sequence())
    for (const auto& item : v->items())
      if (auto s = opt_str(&item)) out.push_back(*s);
  return out;
}

}  // namespace

std::optional<std::string> TpRules::unmergeable_why(const std::string& name) const {
  for (const auto& [p, why] : unmergeable)
    if (matches(p, name, source)) return why;
  return std::nullopt;
}

std::optional<TpRule> TpRules::rule_for(const std::string& name) const {
  if (unmergeable_why(name)) return std::nullopt;
  TpRule r;
  if (auto p = matched(replicated, name, source, kReplicated)) {
    r.kind = TpMerge::Replicated;
    r.pattern = *p;
  } else if (auto a = matched(average, name, source, kAverage)) {
    r.kind = TpMerge::Average;
    r.pattern = *a;
  } else if (auto s = matched(sub_params_cat_dim_0, name, source, kSub2)) {
    r.kind = TpMerge::SubParams2;
    r.pattern = *s;
  } else if (auto w = matched(row_parallel, name, source, kRow)) {
    r.cat_dim = 1;
    r.pattern = *w;
  } else {
    std::optional<std::pair<std::string, int>> hit;
    for (const auto& [p, dim] : cat_dims)
      if (matches(p, name, source)) {
        if (hit)
          throw Error(ErrorKind::InvalidRequest, source, "cat_dim", matched_twice(name, hit->first, p));
        hit = std::make_pair(p, dim);
      }
    if (hit) {
      r.cat_dim = hit->second;
      r.pattern = hit->first;
    } else if (auto v = matched(vocabulary, name, source, kVocab)) {
      r.cat_dim = 0;  // ds_to_universal concatenates vocabulary params on dim 0 before stripping the padding
      r.pattern = *v;
    } else if (default_cat_dim) {
      r.cat_dim = *default_cat_dim;
    } else {
      return std::nullopt;
    }
  }
  r.vocabulary = matched(vocabulary, name, source, kVocab).has_value();
  return r;
}

std::optional<TpRules> tp_rules_of(const Checkpoint& ckpt) {
  const Catalog& c = ckpt.catalog();
  const CheckpointFile* mf = c.metadata_model_file();
  if (!mf) return std::nullopt;
  const Value* info = nullptr;
  try {
    info =
        dict_get(&ckpt.model_file(mf->mp_rank, std::max(mf->dp_rank, 0)).root, "universal_checkpoint_info");
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!info || !info->is_dict()) return std::nullopt;
  TpRules r;
  r.source = mf->path + " universal_checkpoint_info";
  r.replicated = strings_of(dict_get(info, kReplicated));
  r.average = strings_of(dict_get(info, kAverage));
  r.row_parallel = strings_of(dict_get(info, kRow));
  r.vocabulary = strings_of(dict_get(info, kVocab));
  r.sub_params_cat_dim_0 = strings_of(dict_get(info, kSub2));
  r.original_vocab_size = opt_int(dict_get(info, "original_vocab_size"));
  r.default_cat_dim = 0;  // what ds_to_universal.py does with every other param
  // AutoTP (0.18.9+): [{patterns, shape, partition_dim}] of fused params, regrouped by ds_to_universal.py per
  // sub-param; a plain concatenation of their slices would interleave q, k and v.
  if (const Value* subs = dict_get(info, "parameter_with_sub_params"); subs && subs->is_sequence())
    for (const auto& entry : subs->items())
      for (const auto& p : strings_of(dict_get(&entry, "patterns")))
        r.unmergeable.emplace_back(p,
                                   "fused sub-params (parameter_with_sub_params) ckptdoc does not regroup");
  if (const Value* bad = dict_get(info, "autotp_unsupported_parameter_patterns"))
    for (const auto& [p, why] : str_items(bad))
      r.unmergeable.emplace_back(
          p, "DeepSpeed records it as not convertible (autotp_unsupported_parameter_patterns: " +
                 opt_str(why).value_or("no reason given") + ")");
  return r;
}

TpRules read_tp_rules(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, path, "", "cannot be opened (--tp-rules)");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::InvalidRequest, path, "", std::string("not JSON: ") + e.what());
  }
  if (!j.is_object())
    throw Error(ErrorKind::InvalidRequest, path, "", "expected a JSON object of pattern lists");
  TpRules r;
  r.source = path;
  auto list = [&](const char* key, std::vector<std::string>& out) {
    if (!j.contains(key)) return;
    if (!j[key].is_array()) throw Error(ErrorKind::InvalidRequest, path, key, "expected a list of patterns");
    for (const auto& p : j[key]) {
      if (!p.is_string())
        throw Error(ErrorKind::InvalidRequest, path, key, "expected a list of patterns (strings)");
      out.push_back(p.get<std::string>());
    }
  };
  list(kReplicated, r.replicated);
  list(kAverage, r.average);
  list(kRow, r.row_parallel);
  list(kVocab, r.vocabulary);
  list(kSub2, r.sub_params_cat_dim_0);
  if (j.contains("cat_dim")) {
    if (!j["cat_dim"].is_object())
      throw Error(ErrorKind::InvalidRequest, path, "cat_dim", "expected {pattern: dim}");
    for (const auto& [p, d] : j["cat_dim"].items()) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > 7)
        throw Error(ErrorKind::InvalidRequest, path, "cat_dim['" + p + "']", "expected a dimension 0-7");
      r.cat_dims.emplace_back(p, d.get<int>());
    }
  }
  if (j.contains("default_cat_dim")) {
    const auto& d = j["default_cat_dim"];
    if (!d.is_null()) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > 7)
        throw Error(ErrorKind::InvalidRequest, path, "default_cat_dim", "expected a dimension 0-7 or null");
      r.default_cat_dim = d.get<int>();
    }
  }
  if (j.contains("original_vocab_size")) {
    if (!j["original_vocab_size"].is_number_integer() || j["original_vocab_size"].get<int64_t>() < 1)
      throw Error(ErrorKind::InvalidRequest, path, "original_vocab_size", "expected a positive integer");
    r.original_vocab_size = j["original_vocab_size"].get<int64_t>();
  }
  for (const auto& [k, v] : j.items()) {
    static const std::vector<std::string> known{kReplicated,
                                                kAverage,
                                                kRow,
                                                kVocab,
                                                kSub2,
                                                "cat_dim",
                                                "default_cat_dim",
                                                "original_vocab_size",
                                                "padded_vocab_size",
                                                "universal_checkpoint_version",
                                                "pipeline_replicated_parameter_patterns"};
    if (std::find(known.begin(), known.end(), k) == known.end())
      throw Error(
          ErrorKind::InvalidRequest, path, k,
          "unknown key (expected the universal_checkpoint_info pattern lists, cat_dim, default_cat_dim, "
          "original_vocab_size)");
  }
  return r;
}

}  // namespace ckptdoc::deepspeed
