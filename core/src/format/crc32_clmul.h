#pragma once
// CRC-32 (zip's reflected 0xEDB88320) folded 64 bytes at a time with carry-less multiplication (PCLMULQDQ),
// the method of Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ": about ten times the
// table method's speed, so writing or checking a large torch file is not bound by its CRC.
#include <cstddef>
#include <cstdint>

namespace ckptdoc::detail {

// True when this CPU has PCLMULQDQ and SSE4.1 (checked once).
bool crc32_clmul_available();

// Folds the longest prefix of `data` that is a multiple of 16 bytes (n >= 64 required) from the internal CRC
// state `state` (the complemented running CRC): returns the prefix length and writes 16 bytes whose CRC from
// state 0 equals the prefix's from `state`; the caller finishes those and the remaining bytes with a table.
size_t crc32_fold_clmul(uint32_t state, const uint8_t* data, size_t n, uint8_t residue[16]);

}  // namespace ckptdoc::detail
