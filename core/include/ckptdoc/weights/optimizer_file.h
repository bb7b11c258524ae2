#pragma once
// The optimizer state a training script keeps beside its weights as torch.save(optimizer.state_dict()): what
// Hugging Face Accelerate's `accelerator.save_state(DIR)` writes as `optimizer.bin` (`optimizer_<i>.bin` for
// the i-th optimizer) next to `model.safetensors` (Accelerate 1.16, checkpointing.save_accelerator_state),
// and what a Hugging Face Trainer without DeepSpeed or FSDP writes as `optimizer.pt` in checkpoint-N/
// (transformers 5.25, Trainer._save_optimizer_and_scheduler: torch.save(self.optimizer.state_dict()), the
// accelerate wrapper's state_dict being the torch optimizer's). The Trainer's two param groups (decayed, not)
// number the params group after group, not in model.parameters() order: matching by shape covers both.
// torch's layout: {"state": {param index: {"step": t, "exp_avg": T, "exp_avg_sq": T, ...}}, "param_groups":
// [{..., "params": [index, ...]}]}, the indices in model.parameters() order
// (torch.optim.Optimizer.state_dict).
//
// Read with the inert unpickler (nothing is executed); the checks say what they rest on: the indices do not
// name the params, and the weights file keeps them in its own (sorted) order, so moments are matched to the
// weights by shape only (as a multiset: every state's shape must be found among the weights). Accelerate's
// FSDP FULL_STATE_DICT save (pytorch_model_fsdp.bin + optimizer.bin) keys the state by the params' FQNs
// instead (FSDP.optim_state_dict / get_optimizer_state_dict): those are matched to the weights by name.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/format/safetensors.h"  // NamedTensor
#include "ckptdoc/format/value.h"

namespace ckptdoc::weights {

struct OptimizerParamState {
  int64_t index = 0;  // an int key of "state": the param's place in model.parameters()
  std::string
      name;  // a str key instead (FSDP's FULL_STATE_DICT optimizer: the param's FQN); empty for an int
  std::string label() const;   // "state[3]" or "state[transformer.wte.weight]": how findings name it
  std::optional<double> step;  // "step" (a 0-d tensor or a number); unset when absent
  std::map<std::string, Tensor> tensors;  // every other tensor entry ("exp_avg", "exp_avg_sq", ...)
};

struct OptimizerFile {
  std::string file;                         // as named in findings, relative to the folder: "optimizer.bin"
  std::vector<OptimizerParamState> params;  // by index
  size_t params_in_groups = 0;              // params listed by the param groups (ints or FQNs)
  size_t groups = 0;                        // param groups
  std::shared_ptr<const void> keep_alive;   // the mapped file the tensors view
};

// The optimizer state files of a save_state or Trainer folder: optimizer.bin, optimizer_<i>.bin,
// optimizer.pt (sorted).
std::vector<std::string> optimizer_files_in(const std::string& dir);

// Reads `path` (named `file` in messages). Throws ckptdoc::Error naming the file when it is not a readable
// torch.save file of an optimizer state dict (a truncated zip, no "state" / "param_groups").
OptimizerFile read_optimizer_file(const std::string& path, const std::string& file);

// What a diagnosis says it read of one optimizer file.
struct OptimizerFileSummary {
  std::string file;
  bool read = false;                // false: unreadable (an optimizer-file-unreadable finding says why)
  size_t params_in_groups = 0;      // indices listed by the param groups
  size_t params_with_state = 0;     // of them, those with a state entry (none before the first step)
  std::optional<double> step;       // the step all params agree on; unset when none or they differ
  std::vector<std::string> keys;    // every state key met ("exp_avg", "exp_avg_sq", "step"), sorted
  std::vector<std::string> dtypes;  // the state tensors' dtypes, sorted
  size_t tensors_scanned = 0;       // state tensors whose values were read (NaN/Inf, zeros, negatives)
  size_t shapes_matched = 0;        // states whose moment shape was found among the weights' shapes
  size_t names_matched = 0;         // FQN-keyed states whose weight of that name has the moments' shape
  bool by_name = false;             // the state is keyed by FQN (matched by name, not by shape)
  size_t weights_compared = 0;      // weights tensors the shapes were looked for among (0: not compared)
};

// `inspect`'s view of the optimizer files in `dir`: a JSON array, per file {"file", "param_groups",
// "params_in_groups", "params_with_state", "keys", "steps", "params": [{"param" (index or FQN), "step",
// "tensors": {key:
// {"dtype", "shape"}}}]}, or {"file", "error"} for one that cannot be read. Never throws for bad content.
std::string optimizer_files_json(const std::string& dir);

}  // namespace ckptdoc::weights
