// libFuzzer harness: a whole torch.save file (zip or legacy) from arbitrary bytes; touches every tensor.
#include <cstdint>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ckptdoc::UnpickleLimits limits;
  limits.max_alloc_bytes = 1 << 24;
  limits.max_container_items = 1 << 20;
  try {
    auto tf = ckptdoc::TorchFile::open(
        ckptdoc::MappedFile::from_memory("fuzz.pt", std::vector<uint8_t>(data, data + size)), limits);
    for (const auto& s : tf.storages) (void)s->bytes();
    (void)tf.root.repr(1000);
  } catch (const ckptdoc::Error&) {
  }
  return 0;
}
