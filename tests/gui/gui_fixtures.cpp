#include "gui_fixtures.h"

#include <vector>

#include "ckptdoc/format/safetensors.h"
#include "damage_support.h"

namespace ckptdoc::test {

std::string healthy_fixture(const std::string& name) {
  return deepspeed_fixture(name) + "/checkpoint";
}

std::string make_stale_masters_checkpoint(const TempDir& dir) {
  const std::string dst = dir.file("zero2_fp16_ws2");
  copy_tree(healthy_fixture("zero2_fp16_ws2"), dst);
  for (int rank = 0; rank < 2; ++rank)
    replace_fp32_masters_with_noise(optim_file_of(dst + "/global_step5", rank),
                                    static_cast<uint32_t>(100 + rank * 10));
  return dst;
}

std::string make_long_names_weights(const TempDir& dir) {
  std::vector<NamedTensor> tensors;
  for (int layer = 10; layer < 12; ++layer)
    for (const char* proj : {"k_proj", "q_proj", "v_proj"})
      tensors.push_back(
          {"model.decoder.layers." + std::to_string(layer) + ".encoder_attn." + proj + ".weight",
           Tensor::from_bytes(DType::F32, {2, 2}, std::vector<uint8_t>(16, 0))});
  const std::string file = dir.file("model.safetensors");
  write_safetensors_file(file, tensors);
  return file;
}

}  // namespace ckptdoc::test
