#pragma once
// Element types of tensors as torch and safetensors name them, plus exact fp16/bf16 <-> fp32 conversion.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace ckptdoc {

enum class DType : uint8_t { F32, F16, BF16, F64, I64, I32, I16, I8, U8, Bool, C64, C128 };

size_t element_size(DType t);
std::string_view dtype_name(DType t);          // torch spelling: "float32", "float16", "bfloat16", ...
std::string_view storage_class_name(DType t);  // "FloatStorage", "HalfStorage", ...
std::string_view safetensors_name(DType t);    // "F32", "F16", "BF16", ...
std::optional<DType> dtype_from_name(std::string_view torch_name);  // accepts "float32" and "torch.float32"
std::optional<DType> dtype_from_storage_class(std::string_view name);
std::optional<DType> dtype_from_safetensors(std::string_view name);
bool is_floating(DType t);

// IEEE binary16 -> binary32, exact.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// binary32 -> binary16 with round-to-nearest-even, as torch's .half() does.
inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (abs > 0x7f800000u ? (0x200u | ((abs >> 13) & 0x3ffu)) : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {                                               // subnormal or zero in half
    // value = abs as float; half subnormal unit is 2^-24.
    float a;
    std::memcpy(&a, &abs, 4);
    const float scaled = a * 16777216.0f;  // 2^24, exact
    // round half to even
    auto q = static_cast<uint32_t>(scaled);
    const float rem = scaled - static_cast<float>(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t mant_round = abs + 0x00000fffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((mant_round - 0x38000000u) >> 13));
}

inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// binary32 -> bfloat16 with round-to-nearest-even; NaN stays NaN (quiet), as torch does.
inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace ckptdoc
