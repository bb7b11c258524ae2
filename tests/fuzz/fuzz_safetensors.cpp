// libFuzzer harness: the safetensors reader (validation rules) over arbitrary bytes in a temp file.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"

namespace {

// The harness's input file, removed when the run ends normally (a crash leaves it beside the crash input).
struct TempInput {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("ckptdoc-fuzz-" + std::to_string(::getpid()) + ".safetensors"))
                         .string();
  ~TempInput() { std::remove(path.c_str()); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const TempInput input;
  const std::string& path = input.path;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    auto sf = ckptdoc::SafetensorsFile::open(path);
    for (const auto& e : sf.entries) (void)e.tensor.contiguous_bytes();
  } catch (const ckptdoc::Error&) {
  }
  return 0;
}
