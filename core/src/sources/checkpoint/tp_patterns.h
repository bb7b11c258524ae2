#pragma once
// How ds_to_universal.py's merge_tp_slices stores a param, from the regex patterns of the model file's
// universal_checkpoint_info (§7.2 step 4). With one tensor-parallel rank the values are the param's own; the
// patterns decide the keys of its state dicts, and a vocabulary param loses its padded rows.
#include <cstdint>
#include <set>
#include <string>

#include "ckptdoc/format/value.h"

namespace ckptdoc::universal::detail {

enum class MergeKind : uint8_t {
  CatDim,        // {'cat_dim': d, 'param': t}: d = 1 for row-parallel patterns, else 0
  Replicated,    // {'param': t} (tp_replicated_parameter_patterns)
  Average,       // {'param': sum([t]) / 1} (parameter_to_average_patterns): -0.0 becomes +0.0
  TwoSubParams,  // {'cat_dim': 0, 'param_n_sub_params': 2, 'param': t}
};

struct ParamMerge {
  MergeKind kind = MergeKind::CatDim;
  int cat_dim = 0;
  bool vocab = false;  // vocabulary_parameter_patterns: rows cut to original_vocab_size, 'vocab_tensor': True
  int64_t vocab_rows = 0;
};

class TpPatterns {
 public:
  // `info`: the model file's universal_checkpoint_info (nullptr: none, every param CatDim 0). Throws
  // ckptdoc::Error for what ckptdoc does not write (parameter_with_sub_params) or cannot read.
  explicit TpPatterns(const Value* info);
  // Throws ckptdoc::Error when several patterns of one list match `name` (ds_to_universal.py asserts).
  ParamMerge merge_for(const std::string& name);
  // pipeline_replicated_parameter_patterns: params every pipeline stage saves (tied embeddings);
  // ds_to_universal takes the first stage's.
  bool pipeline_replicated(const std::string& name) const;
  // Patterns no param matched: ds_to_universal.py (strict by default) refuses such a checkpoint.
  std::set<std::string> unmatched() const { return unmatched_; }

 private:
  std::set<std::string> all_;
  std::set<std::string> unmatched_;
  const Value* info_;
};

}  // namespace ckptdoc::universal::detail
