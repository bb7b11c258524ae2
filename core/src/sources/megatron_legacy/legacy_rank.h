#pragma once
// One model_optim_rng.pt of a legacy Megatron checkpoint, read with the inert unpickler (never executed):
// the model's tensors, the non-distributed optimizer's fp32 mains (optimizer.fp32_from_fp16_params) and
// param groups, and the saved args Namespace's sizes (docs/megatron-legacy-format.md).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/pickle_safety.h"
#include "ckptdoc/format/safetensors.h"  // NamedTensor
#include "ckptdoc/format/torch_file.h"

namespace ckptdoc::megatron_legacy {

// optimizer.optimizer.param_groups[g] as megatron-core saves it (_get_param_groups: the override fields).
struct ParamGroup {
  size_t params = 0;         // len(params)
  std::vector<int64_t> ids;  // params: the optimizer state's keys of the group's params, in group order
  std::optional<double> wd_mult, lr_mult;
  bool is_expert_parallel = false, is_decoupled_lr = false;
};

// One tensor of torch's optimizer state: state[key][field].
struct StateTensor {
  std::string name;  // "state.<key>.<field>"
  int64_t key = -1;  // the param's index in the param groups' "params" (-1: not an int)
  Tensor tensor;
};

struct RankContent {
  std::shared_ptr<const TorchFile> file;  // null when unreadable
  std::string error;                      // why it could not be read (Error::what), else empty
  ErrorKind error_kind = ErrorKind::Other;
  std::vector<PickleHazard> hazards;
  std::vector<std::string> keys;   // the root dict's keys
  std::string model_key;           // "model" ("model0", ... with a virtual pipeline: not read)
  std::vector<NamedTensor> model;  // root[model]'s tensors but *._extra_state, in saved order
  size_t model_non_tensors = 0;    // its other entries (_extra_state None)
  bool has_optimizer = false;
  std::string optimizer_layout;  // why no mains were read, when there are none ("" when they were)
  std::vector<ParamGroup> groups;
  std::vector<std::vector<Tensor>> mains;      // optimizer.fp32_from_fp16_params[g][i]
  std::vector<StateTensor> optimizer_tensors;  // optimizer.optimizer.state[<i>].<key>
  std::optional<int64_t> iteration;
  std::optional<double> checkpoint_version;
  std::string args_type;  // "argparse.Namespace"
  size_t args_fields = 0;
  int tp_size = 1, pp_size = 1, ep_size = 1, vpp_size = 0;
  int num_layers = 0;  // args.num_layers (0: not saved)
  bool use_distributed_optimizer = false, swiglu = false;
  bool readable() const { return file != nullptr; }
};

// Reads `path` (named `shown` in messages). Never throws for the file's content: what cannot be read is in
// `error`, and the pickle's hazards are assessed either way (torch.load may still run what it names).
RankContent read_rank(const std::string& path, const std::string& shown);

}  // namespace ckptdoc::megatron_legacy
