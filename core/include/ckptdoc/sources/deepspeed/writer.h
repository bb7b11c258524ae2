#pragma once
// Writing DeepSpeed checkpoint files: builders for the Python objects DeepSpeed pickles (loss scalers,
// ZeroStageEnum, fragment_address, sets, OrderedDicts, torch Adam's 0-dim `step`), the flat-partition
// arithmetic of deepspeed-format.md §5, and file naming/writing as `engine.save_checkpoint` does it
// (torch.save zip, archive name = file stem, storages on 'cpu'). Repairs rewrite an existing file by
// cloning its own Value tree and replacing only what changes, so client keys and objects stay verbatim.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/dtype.h"
#include "ckptdoc/format/value.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/sources/deepspeed/layout.h"

namespace ckptdoc::deepspeed {

// ---- Python objects as DeepSpeed pickles them (deepspeed-format.md §1.3) ----------------------------------

// `collections.OrderedDict()` (empty).
Value ordered_dict();
// `set([...])` of strings (sparse_tensor_module_names).
Value string_set(const std::vector<std::string>& items = {});

struct LossScalerState {
  bool dynamic = true;
  double cur_scale = 65536;  // written as an int when integral, like DeepSpeed's initial 2**k
  int64_t cur_iter = 0;
  int64_t last_overflow_iter = -1;
  double scale_factor = 2.0;
  int64_t scale_window = 1000;
  double min_scale = 1;
  int64_t delayed_shift = 2;
  int64_t cur_hysteresis = 2;
  bool consecutive_hysteresis = false;
  bool raise_error_at_min_scale = true;
  DType dtype = DType::F16;
};
// `deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler` (dynamic) or `LossScaler` (static: cur_scale,
// dynamic=False), as NEWOBJ + BUILD state with DeepSpeed 0.12's attribute set.
Value loss_scaler_object(const LossScalerState& s);

// `ZeroStageEnum.<member>` as Python 3 pickles an Enum: `getattr(ZeroStageEnum, 'gradients')`
// (stage 1 = optimizer_states, 2 = gradients, 3 = weights).
Value zero_stage_object(int stage);
// The stage held by a `zero_stage` value: a plain int, the getattr form or an int-reduced enum.
std::optional<int> zero_stage_of(const Value& v);

// `deepspeed.utils.tensor_fragment.fragment_address(numel=, start=)`.
Value fragment_address_object(int64_t numel, int64_t start);
// Reads numel/start back (nullopt when `v` is not a fragment_address).
std::optional<std::pair<int64_t, int64_t>> fragment_address_of(const Value& v);

// torch Adam's step: a 0-dim float32 tensor.
Value step_tensor(float step);
// A scalar step of any spelling (0-dim tensor, int, float) as a double; nullopt otherwise.
std::optional<double> step_of(const Value& v);

// A contiguous 1-D float32 tensor whose `numel` elements come from `fill(first, count, out)` when written,
// produced in chunks so huge tensors never sit in memory. `storage_numel` >= numel lets the storage hold
// a padded partition while the tensor views only its lean prefix (as DeepSpeed saves ZeRO-1/2 masters).
using FloatFill = std::function<void(int64_t first, int64_t count, float* out)>;
Tensor produced_f32(int64_t numel, FloatFill fill, int64_t storage_numel = -1, bool requires_grad = false);
// Same for a low-precision (F16/BF16/F32) storage, from fp32 values rounded to nearest even.
std::shared_ptr<Storage> produced_lp_storage(DType dtype, int64_t numel, FloatFill fill);
// A view on `storage` with `shape` at element `offset` (contiguous strides).
Tensor view_of(const std::shared_ptr<Storage>& storage, DType dtype, std::vector<int64_t> shape,
               int64_t offset);

// ---- Partition helpers (layout.h has the flat-group arithmetic of deepspeed-format.md §5)
// ----------------------

// ZeRO-3: ceil(numel / dp).
inline int64_t zero3_partition_numel(int64_t numel, int dp) {
  return (numel + dp - 1) / dp;
}

struct ParamSpan {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
};
// `param_slice_mappings[g]` of `rank`: OrderedDict{name: fragment_address} for the params overlapping the
// rank's partition (layout.h's expected_slice_mappings, as Python objects).
Value slice_mappings_value(const GroupLayout& group, int rank);
// ZeRO-3 sub-groups of one param group: indices of params per sub-group (deepspeed-format.md §5.3).
std::vector<std::vector<int>> zero3_sub_groups(const std::vector<ParamSpan>& params, int dp,
                                               int64_t sub_group_size = 1000000000);

// ---- Names and files --------------------------------------------------------------------------------------

std::string model_file_name(int zero_stage, int dp_rank, int mp_rank = 0);  // mp_rank_00_model_states.pt, ...
std::string optim_file_name(bool bf16_prefix, int dp_rank, int mp_rank = 0);
// torch.save's archive folder name for a path: its stem ("mp_rank_00_model_states").
std::string archive_name_for(const std::string& path);
// Writes `root` like torch.save(obj, path) does (zip, archive = stem), atomically through `io`.
void write_checkpoint_file(const std::string& path, const Value& root, FileIo& io = current_io());
// Writes a small text file (e.g. `latest`, no trailing newline) atomically.
void write_text_file(const std::string& path, const std::string& text, FileIo& io = current_io());
// Copies a file byte for byte (a new inode; never a link) atomically.
void copy_file(const std::string& from, const std::string& to, FileIo& io = current_io());

}  // namespace ckptdoc::deepspeed
