// Spotting a str in pickle bytes (pickle_strings.h).
#include "ckptdoc/format/pickle_strings.h"

#include <string>

namespace ckptdoc {

namespace {

// The opcode, its length field (little-endian, `width` bytes) and the payload.
std::string length_prefixed(char op, size_t width, std::string_view s) {
  std::string out(1, op);
  uint64_t n = s.size();
  for (size_t i = 0; i < width; ++i, n >>= 8) out += static_cast<char>(n & 0xff);
  out += s;
  return out;
}

}  // namespace

bool pickle_may_hold_str(std::span<const uint8_t> pickle, std::string_view s) {
  const std::string_view p(reinterpret_cast<const char*>(pickle.data()), pickle.size());
  if (p.find(s) == std::string_view::npos) return false;  // the common case, one pass
  std::string spellings[] = {
      length_prefixed('\x8c', 1, s),  // SHORT_BINUNICODE (protocol 4+)
      length_prefixed('X', 4, s),     // BINUNICODE (protocols 1-3, and 4+ for long strs)
      length_prefixed('\x8d', 8, s),  // BINUNICODE8
      length_prefixed('U', 1, s),     // SHORT_BINSTRING (Python 2 str)
      length_prefixed('T', 4, s),     // BINSTRING
      "V" + std::string(s) + "\n",    // UNICODE (protocol 0)
      "V" + std::string(s) + "\r",    // the unpickler also reads CRLF lines
      "S'" + std::string(s) + "'",    // STRING (protocol 0, Python 2 str)
      "S\"" + std::string(s) + "\"",
  };
  if (s.size() > 0xff) spellings[0].clear(), spellings[3].clear();  // a 1-byte length cannot say it
  for (const auto& needle : spellings)
    if (!needle.empty() && p.find(needle) != std::string_view::npos) return true;
  return false;
}

}  // namespace ckptdoc
