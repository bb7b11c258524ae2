#include "sources/checkpoint/tp_patterns.h"

#include <array>
#include <cstdio>
#include <regex>
#include <vector>

#include "ckptdoc/error.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::universal::detail {
namespace {

using deepspeed::detail::dict_get;

std::vector<std::string> patterns(const Value* info, const char* key) {
  std::vector<std::string> out;
  const Value* list = dict_get(info, key);
  if (!list) return out;
  if (!list->is_sequence())
    throw Error(ErrorKind::Corrupt, "", std::string("universal_checkpoint_info['") + key + "']",
                "not a list");
  for (const auto& p : list->items()) {
    if (!p.is(Value::Kind::Str))
      throw Error(ErrorKind::Corrupt, "", std::string("universal_checkpoint_info['") + key + "']",
                  "a pattern is not a string");
    out.push_back(p.as_str());
  }
  return out;
}

// Python's re.match: the pattern must match at the start of the name (not necessarily to its end).
bool re_match(const std::string& pattern, const std::string& name) {
  try {
    return std::regex_search(name, std::regex(pattern), std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    throw Error(ErrorKind::Corrupt, "", "universal_checkpoint_info pattern '" + pattern + "'",
                std::string("not a usable regex: ") + e.what());
  }
}

constexpr const char* kReplicated = "tp_replicated_parameter_patterns";
constexpr const char* kAverage = "parameter_to_average_patterns";
constexpr const char* kRow = "parameter_with_row_parallelism_patterns";
constexpr const char* kVocab = "vocabulary_parameter_patterns";
constexpr const char* kTwoSub = "parameter_with_2_sub_params_cat_dim_0";
constexpr double kNewestVersion = 0.4;  // UNIVERSAL_CHECKPOINT_VERSION_VALUE of DeepSpeed 0.19.8

}  // namespace

TpPatterns::TpPatterns(const Value* info) : info_(info) {
  if (dict_get(info, "parameter_with_sub_params"))
    throw Error(ErrorKind::Unsupported, "", "universal_checkpoint_info['parameter_with_sub_params']",
                "sub-param shapes (SubparamShape) are not written by ckptdoc yet; use DeepSpeed's "
                "ds_to_universal.py");
  // A later version may record what ckptdoc cannot read.
  const auto version = deepspeed::detail::opt_float(dict_get(info, "universal_checkpoint_version"));
  if (version && *version > kNewestVersion) {
    std::array<char, 32> v{};
    std::snprintf(v.data(), v.size(), "%g", *version);
    throw Error(ErrorKind::Unsupported, "", "universal_checkpoint_info['universal_checkpoint_version']",
                std::string("version ") + v.data() +
                    " is newer than the 0.4 ckptdoc knows (DeepSpeed 0.19); use that DeepSpeed's "
                    "ds_to_universal.py");
  }
  // Layouts DeepSpeed 0.19 records beside the pattern lists, which change how its converter merges a param:
  // ckptdoc does not read them, so it refuses rather than merge by the patterns alone.
  auto non_empty = [info](const char* key) {
    const Value* v = dict_get(info, key);
    return v && !((v->is_dict() && v->as_dict().items.empty()) || (v->is_sequence() && v->items().empty()));
  };
  for (const char* key : {"affine_map", "autotp_unsupported_parameter_patterns", "ds_autoep_layers",
                          "expert_parameter_patterns"})
    if (non_empty(key))
      throw Error(ErrorKind::Unsupported, "", std::string("universal_checkpoint_info['") + key + "']",
                  "AutoTP/AutoEP layouts (affine maps, expert placement) are not converted by ckptdoc; use "
                  "DeepSpeed's ds_to_universal.py");
  for (const char* k : {kReplicated, kAverage, kRow, kVocab, kTwoSub})
    for (const auto& p : patterns(info, k)) all_.insert(p);
  unmatched_ = all_;
}

ParamMerge TpPatterns::merge_for(const std::string& name) {
  auto matched = [&](const char* key) {
    std::vector<std::string> hits;
    for (const auto& p : patterns(info_, key))
      if (re_match(p, name)) hits.push_back(p);
    if (hits.size() > 1)
      throw Error(ErrorKind::Inconsistent, "", std::string("universal_checkpoint_info['") + key + "']",
                  "several patterns match '" + name + "' (" + hits[0] + ", " + hits[1] + ")");
    if (!hits.empty()) unmatched_.erase(hits[0]);
    return !hits.empty();
  };
  ParamMerge m;
  if (matched(kReplicated)) {
    m.kind = MergeKind::Replicated;
  } else if (matched(kAverage)) {
    m.kind = MergeKind::Average;
  } else if (matched(kTwoSub)) {
    m.kind = MergeKind::TwoSubParams;
  } else {
    m.cat_dim = matched(kRow) ? 1 : 0;
  }
  if (matched(kVocab)) {
    const auto rows = deepspeed::detail::opt_int(dict_get(info_, "original_vocab_size"));
    if (!rows || *rows < 0)
      throw Error(ErrorKind::Corrupt, "", "universal_checkpoint_info['original_vocab_size']",
                  "missing or not a count");
    m.vocab = true;
    m.vocab_rows = *rows;
  }
  return m;
}

bool TpPatterns::pipeline_replicated(const std::string& name) const {
  for (const auto& p : patterns(info_, "pipeline_replicated_parameter_patterns"))
    if (re_match(p, name)) return true;
  return false;
}

}  // namespace ckptdoc::universal::detail
