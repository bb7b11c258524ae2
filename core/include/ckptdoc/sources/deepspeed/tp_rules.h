#pragma once
// How the tensor-parallel slices of each param make the whole param, in the vocabulary of
// Megatron-DeepSpeed's `universal_checkpoint_info` (a client key of the model files, read by DeepSpeed's
// ds_to_universal.py:: merge_tp_slices): replicated params are the same on every tensor rank, averaged ones
// are averaged, row-parallel ones are concatenated on dim 1, fused two-sub-param ones are split in halves and
// regrouped on dim 0, the rest is concatenated on dim 0 (or the dim a rule gives), and vocabulary params lose
// the padding rows beyond original_vocab_size. Patterns are Python regular expressions matched at the start
// of the name (re.match).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ckptdoc::deepspeed {

class Checkpoint;

enum class TpMerge : uint8_t { Replicated, Average, Concat, SubParams2 };

struct TpRule {
  TpMerge kind = TpMerge::Concat;
  int cat_dim = 0;          // Concat / SubParams2
  bool vocabulary = false;  // truncate dim 0 to original_vocab_size after merging
  std::string pattern;      // the pattern that decided (empty: the default)
};

struct TpRules {
  std::string source;  // where they come from, for messages
  std::vector<std::string> replicated, average, row_parallel, vocabulary, sub_params_cat_dim_0;
  std::vector<std::pair<std::string, int>> cat_dims;  // explicit {pattern, dim} (rule files only)
  std::optional<int>
      default_cat_dim;  // checkpoint info: 0, as ds_to_universal.py; a rule file: when it says so
  std::optional<int64_t> original_vocab_size;
  // {pattern, why}: params whose slices no rule here merges the way DeepSpeed would (AutoTP's fused
  // sub-params, parameter_with_sub_params; the params it records as autotp_unsupported_parameter_patterns).
  // rule_for gives them no rule, so an export names them instead of concatenating.
  std::vector<std::pair<std::string, std::string>> unmergeable;

  // The rule for a param name; nullopt when none applies. Throws ckptdoc::Error when a name matches several
  // patterns of one list (ds_to_universal.py asserts the same) or a pattern is not a valid regular
  // expression.
  std::optional<TpRule> rule_for(const std::string& name) const;
  // Why a name has no rule although a default would apply (an `unmergeable` pattern); nullopt otherwise.
  std::optional<std::string> unmergeable_why(const std::string& name) const;
};

// The rules a checkpoint's model file carries (universal_checkpoint_info), nullopt when it has none.
std::optional<TpRules> tp_rules_of(const Checkpoint& ckpt);

// A rule file: JSON with the universal_checkpoint_info keys (tp_replicated_parameter_patterns,
// parameter_to_average_patterns, parameter_with_row_parallelism_patterns, vocabulary_parameter_patterns,
// parameter_with_2_sub_params_cat_dim_0, original_vocab_size), plus "cat_dim": {pattern: dim} and
// "default_cat_dim": dim. Throws ckptdoc::Error naming the file and what is wrong.
TpRules read_tp_rules(const std::string& path);

}  // namespace ckptdoc::deepspeed
