#pragma once
// Whether a pickle may hold a given str, read from its bytes without unpickling: a cheap test before a full
// read that only matters if the str is there (sources/deepspeed/content_roles.cpp: a rank file's root keys).
#include <cstdint>
#include <span>
#include <string_view>

namespace ckptdoc {

// True when the pickle spells `s` whole as the payload of a string opcode the unpickler reads as a str:
// SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, SHORT_BINSTRING, BINSTRING (length-prefixed), UNICODE and
// STRING (text lines). A pickle spells each str it holds once before any memo get refers to it, so false
// means no str equal to `s` comes out of it; a longer str containing `s` ("optim_target_modules" for
// "module") does not count. Text opcodes are matched as a pickler writes them: a str whose plain ASCII
// characters a hand-made pickle spelled by escapes (V\u006d..., S'\x6d...') is not seen.
bool pickle_may_hold_str(std::span<const uint8_t> pickle, std::string_view s);

}  // namespace ckptdoc
