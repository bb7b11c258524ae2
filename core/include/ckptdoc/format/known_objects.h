#pragma once
// Readers for objects the unpickler keeps as inert descriptions (ObjectData) but that tools need to
// understand: DeepSpeed's ZeroStageEnum, fragment_address and loss scalers, argparse.Namespace, complex
// numbers and numpy arrays/scalars/dtypes. Each returns nullopt/nullptr when the value is not that object.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ckptdoc/format/value.h"

namespace ckptdoc {

// deepspeed.runtime.zero.config.ZeroStageEnum(n) (or a plain int, as older files store it) -> n.
std::optional<int64_t> zero_stage_value(const Value& v);

// deepspeed fragment_address (deepspeed.utils.tensor_fragment or deepspeed.runtime.bf16_optimizer)
// -> (numel, start).
std::optional<std::pair<int64_t, int64_t>> fragment_address_of(const Value& v);

// deepspeed.runtime.fp16.loss_scaler.LossScaler / DynamicLossScaler -> its state dict (cur_scale, ...).
bool is_loss_scaler(const Value& v);
const Value* loss_scaler_state(const Value& v);

// argparse.Namespace -> its attribute dict.
const Value* namespace_attrs(const Value& v);

// builtins.complex(re, im).
std::optional<std::pair<double, double>> complex_of(const Value& v);

// numpy.dtype('f4') with its BUILD state -> "<f4" (byte order + kind + size; "|u1", ">i8", "|b1", ...).
std::optional<std::string> numpy_dtype_of(const Value& v);

struct NumpyArray {
  std::string dtype;  // as numpy_dtype_of
  std::vector<int64_t> shape;
  bool fortran_order = false;
  std::string data;                // raw element bytes (empty for object arrays)
  const Value* objects = nullptr;  // the list of elements of a dtype=object array, else nullptr
};
// numpy.core.multiarray._reconstruct + BUILD (protocol 2-4), numpy.core.numeric._frombuffer (protocol 5),
// and the numpy>=2 numpy._core spellings.
std::optional<NumpyArray> numpy_array_of(const Value& v);

// numpy.core.multiarray.scalar(dtype, bytes) -> (dtype string, raw bytes).
std::optional<std::pair<std::string, std::string>> numpy_scalar_of(const Value& v);
// The scalar converted to double for display (numeric kinds 'f', 'i', 'u', 'b' of 1-8 bytes).
std::optional<double> numpy_scalar_as_double(const Value& v);

}  // namespace ckptdoc
