#pragma once
// Readers a repair writes from: a checkpoint's fp32 masters, optimizer moments and lp weights addressed per
// param and element (whatever the layout they are stored in), read straight from the mapped files.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/layout.h"

namespace ckptdoc::deepspeed::detail {

// A param as a repair sees it: where it lives in the (old or new) layout.
struct ParamPlace {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int group = 0;       // flat group (ZeRO-1/2, BF16) or sub-group (ZeRO-3)
  int64_t offset = 0;  // offset in the flat group / in each rank's sub-group partition
};

// The trainable params of a checkpoint in the layout of its own files.
struct SourceLayout {
  bool zero3 = false;
  bool bf16_optimizer = false;
  int dp = 0;
  std::vector<deepspeed::GroupLayout> groups;  // flat groups or sub-groups, with per-rank saved lengths
  std::map<std::string, ParamPlace> params;
  std::vector<std::string> order;  // params in flat order, group by group
};
SourceLayout source_layout(const deepspeed::Checkpoint& ckpt);

// Reads `field` ("fp32" for the master, or an optimizer state key such as "exp_avg") of one param from
// whichever ranks hold it. A rank that is missing, lacks the field or holds too few elements is an Error
// naming the file, the field and the rank: nothing is read as zeros.
class StateReader {
 public:
  StateReader(const deepspeed::Checkpoint& ckpt, const SourceLayout& layout);
  bool has_field(const std::string& field) const;  // false when the optimizer state is empty
  void read(const std::string& field, const std::string& param, int64_t first, int64_t n, float* out) const;
  const SourceLayout& layout() const { return layout_; }

 private:
  std::span<const float> span(const std::string& field, int rank, int group) const;
  std::string where(int rank) const;  // the file rank `rank`'s state is read from
  const deepspeed::Checkpoint& ckpt_;
  const SourceLayout& layout_;
  mutable std::map<std::tuple<std::string, int, int>, Tensor> cache_;
};

// Reads lp weights (module entries or an external consolidated file) upcast to fp32.
class LpReader {
 public:
  LpReader(Backend& backend) : backend_(backend) {}
  void add(const std::string& name, Tensor t) { tensors_[name] = std::move(t); }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const Tensor* find(const std::string& name) const;
  // Elements [first, first+n) of the flattened param, as float32.
  void read(const std::string& name, int64_t first, int64_t n, float* out) const;

 private:
  Backend& backend_;
  std::map<std::string, Tensor> tensors_;
  mutable std::map<std::string, std::vector<uint8_t>> copies_;  // for non-contiguous tensors
};

// Fills `lp` with the module entries of the checkpoint's trainable params (ZeRO-1/2/BF16 model file).
void add_module_lp(const deepspeed::Checkpoint& ckpt, const SourceLayout& layout, LpReader& lp);
// Loads a consolidated weights file (safetensors or torch.save; a state dict, possibly under 'module',
// 'state_dict' or 'model', names possibly prefixed 'module.'). The returned object keeps the file mapped.
std::shared_ptr<void> add_file_lp(const std::string& path, LpReader& lp);

}  // namespace ckptdoc::deepspeed::detail
