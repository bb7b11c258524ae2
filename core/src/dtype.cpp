#include "ckptdoc/dtype.h"

#include <array>

namespace ckptdoc {
namespace {
struct DTypeInfo {
  DType type;
  size_t size;
  std::string_view torch, storage, safetensors;
  bool floating;
};
constexpr std::array<DTypeInfo, 12> kInfo{{
    {DType::F32, 4, "float32", "FloatStorage", "F32", true},
    {DType::F16, 2, "float16", "HalfStorage", "F16", true},
    {DType::BF16, 2, "bfloat16", "BFloat16Storage", "BF16", true},
    {DType::F64, 8, "float64", "DoubleStorage", "F64", true},
    {DType::I64, 8, "int64", "LongStorage", "I64", false},
    {DType::I32, 4, "int32", "IntStorage", "I32", false},
    {DType::I16, 2, "int16", "ShortStorage", "I16", false},
    {DType::I8, 1, "int8", "CharStorage", "I8", false},
    {DType::U8, 1, "uint8", "ByteStorage", "U8", false},
    {DType::Bool, 1, "bool", "BoolStorage", "BOOL", false},
    {DType::C64, 8, "complex64", "ComplexFloatStorage", "C64", false},
    {DType::C128, 16, "complex128", "ComplexDoubleStorage", "C128", false},
}};
const DTypeInfo& info(DType t) {
  return kInfo[static_cast<size_t>(t)];
}
}  // namespace

size_t element_size(DType t) {
  return info(t).size;
}
std::string_view dtype_name(DType t) {
  return info(t).torch;
}
std::string_view storage_class_name(DType t) {
  return info(t).storage;
}
std::string_view safetensors_name(DType t) {
  return info(t).safetensors;
}
bool is_floating(DType t) {
  return info(t).floating;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  // torch's aliases
  if (name == "float") name = "float32";
  if (name == "half") name = "float16";
  if (name == "double") name = "float64";
  if (name == "long") name = "int64";
  if (name == "int") name = "int32";
  if (name == "short") name = "int16";
  for (const auto& i : kInfo)
    if (i.torch == name) return i.type;
  return std::nullopt;
}

std::optional<DType> dtype_from_storage_class(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.storage == name) return i.type;
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.safetensors == name) return i.type;
  return std::nullopt;
}

}  // namespace ckptdoc
