#pragma once
// Byte counts and counts for people: "1.4 GiB", "512 B", "1,234,567". One spelling for every command, plan
// and view.
#include <cstdint>
#include <string>

namespace ckptdoc {

std::string human_bytes(uint64_t n);
// 1234567 -> "1,234,567".
std::string grouped(int64_t n);

}  // namespace ckptdoc
