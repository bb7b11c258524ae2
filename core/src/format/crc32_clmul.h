#pragma once
// CRC-32 (the zip/gzip polynomial, reflected) with carry-less multiplication: four 128-bit lanes folded 64
// bytes at a time, then reduced to 32 bits (Barrett). Several times faster than tables, so writing a
// torch.save record costs about what reading its bytes does.
#include <cstddef>
#include <cstdint>

namespace ckptdoc::detail {

// Whether this processor has PCLMULQDQ and SSE4.1 (checked once).
bool crc32_clmul_available();
// Advances the raw (pre-inverted) CRC state over n bytes; n >= 64 and a multiple of 16. Only call when
// crc32_clmul_available().
uint32_t crc32_clmul(uint32_t state, const uint8_t* data, size_t n);

}  // namespace ckptdoc::detail
