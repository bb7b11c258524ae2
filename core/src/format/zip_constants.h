#pragma once
// Signatures and fixed sizes of the zip records that the reader and the writer share (APPNOTE 6.3).
#include <cstdint>

namespace ckptdoc::zip {

inline constexpr uint32_t kSigLocal = 0x04034b50;         // "PK\3\4"
inline constexpr uint32_t kSigCentral = 0x02014b50;       // "PK\1\2"
inline constexpr uint32_t kSigDescriptor = 0x08074b50;    // "PK\7\8"
inline constexpr uint32_t kSigEocd = 0x06054b50;          // "PK\5\6"
inline constexpr uint32_t kSigZip64Eocd = 0x06064b50;     // "PK\6\6"
inline constexpr uint32_t kSigZip64Locator = 0x07064b50;  // "PK\6\7"

inline constexpr uint64_t kLocalSize = 30;
inline constexpr uint64_t kCdhSize = 46;
inline constexpr uint64_t kEocdSize = 22;
inline constexpr uint64_t kZip64EocdSize = 56;
inline constexpr uint64_t kZip64LocatorSize = 20;
inline constexpr uint64_t kMaxComment = 0xFFFF;

inline constexpr uint16_t kZip64ExtraId = 0x0001;
inline constexpr uint16_t kPaddingExtraId = 0x4246;  // "FB", torch's alignment padding
inline constexpr uint64_t kMax32 = 0xFFFFFFFFu;
inline constexpr uint64_t kMax16 = 0xFFFFu;

}  // namespace ckptdoc::zip
