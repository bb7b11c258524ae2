#include "format/crc32_clmul.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ckptdoc::detail {

#if defined(__x86_64__) || defined(__i386__)

bool crc32_clmul_available() {
  static const bool ok = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return ok;
}

namespace {

// x * x^d mod P for a 128-bit block: its low half times k_lo plus its high half times k_hi (reflected
// domain).
__attribute__((target("pclmul,sse4.1"))) inline __m128i fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

}  // namespace

__attribute__((target("pclmul,sse4.1"))) size_t crc32_fold_clmul(uint32_t state, const uint8_t* data,
                                                                 size_t n, uint8_t residue[16]) {
  // Constants for 0xEDB88320: x^(512+64) and x^512 (fold across 64 bytes), x^(128+64) and x^128 (16 bytes),
  // mod P.
  const __m128i k4 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
  const __m128i k1 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
  const uint8_t* p = data;
  auto load = [](const uint8_t* q) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)); };
  __m128i x0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(state)));
  __m128i x1 = load(p + 16), x2 = load(p + 32), x3 = load(p + 48);
  p += 64;
  size_t left = n - 64;
  while (left >= 64) {
    x0 = _mm_xor_si128(fold(x0, k4), load(p));
    x1 = _mm_xor_si128(fold(x1, k4), load(p + 16));
    x2 = _mm_xor_si128(fold(x2, k4), load(p + 32));
    x3 = _mm_xor_si128(fold(x3, k4), load(p + 48));
    p += 64;
    left -= 64;
  }
  __m128i x = _mm_xor_si128(fold(x0, k1), x1);
  x = _mm_xor_si128(fold(x, k1), x2);
  x = _mm_xor_si128(fold(x, k1), x3);
  while (left >= 16) {
    x = _mm_xor_si128(fold(x, k1), load(p));
    p += 16;
    left -= 16;
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(residue), x);
  return n - left;
}

#else

bool crc32_clmul_available() {
  return false;
}
size_t crc32_fold_clmul(uint32_t, const uint8_t*, size_t, uint8_t*) {
  return 0;
}

#endif

}  // namespace ckptdoc::detail
