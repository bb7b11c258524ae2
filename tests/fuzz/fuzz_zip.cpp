// libFuzzer harness: the zip reader over arbitrary bytes must throw ckptdoc::Error or succeed, never crash.
#include <cstdint>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/zip_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ckptdoc::ZipReader zip(
        ckptdoc::MappedFile::from_memory("fuzz.zip", std::vector<uint8_t>(data, data + size)));
    for (const auto& e : zip.entries()) {
      try {
        auto bytes = zip.data(e);
        (void)zip.verify_crc(e);
        (void)bytes;
      } catch (const ckptdoc::Error&) {
      }
    }
  } catch (const ckptdoc::Error&) {
  }
  return 0;
}
