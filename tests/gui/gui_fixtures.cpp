#include "gui_fixtures.h"

#include "damage_support.h"

namespace ckptdoc::test {

std::string healthy_fixture(const std::string& name) { return deepspeed_fixture(name) + "/checkpoint"; }

std::string make_stale_masters_checkpoint(const TempDir& dir) {
  const std::string dst = dir.file("zero2_fp16_ws2");
  copy_tree(healthy_fixture("zero2_fp16_ws2"), dst);
  for (int rank = 0; rank < 2; ++rank)
    replace_fp32_masters_with_noise(optim_file_of(dst + "/global_step5", rank), static_cast<uint32_t>(100 + rank * 10));
  return dst;
}

}  // namespace ckptdoc::test
