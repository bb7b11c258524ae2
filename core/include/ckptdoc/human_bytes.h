#pragma once
// Byte counts for people: "1.4 GiB", "512 B". One spelling for every command, plan and view.
#include <cstdint>
#include <string>

namespace ckptdoc {

std::string human_bytes(uint64_t n);

}  // namespace ckptdoc
