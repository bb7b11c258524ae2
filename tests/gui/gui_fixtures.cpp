#include "gui_fixtures.h"

#include <random>

#include "ckptdoc/format/torch_file.h"

namespace ckptdoc::test {

std::string healthy_fixture(const std::string& name) { return deepspeed_fixture(name) + "/checkpoint"; }

std::string make_stale_masters_checkpoint(const TempDir& dir) {
  const std::string dst = dir.file("zero2_fp16_ws2");
  copy_tree(healthy_fixture("zero2_fp16_ws2"), dst);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string path = dst + "/global_step5/zero_pp_rank_" + std::to_string(rank) + "_mp_rank_00_optim_states.pt";
    Value root = TorchFile::open(path).root;
    auto& groups = root.get_mut("optimizer_state_dict")->get_mut("single_partition_of_fp32_groups")->items_mut();
    for (size_t g = 0; g < groups.size(); ++g) {
      const Tensor& t = groups[g].as_tensor();
      std::mt19937 gen(static_cast<uint32_t>(100 + rank * 10 + g));
      std::normal_distribution<float> dist(0.0f, 0.02f);
      std::vector<uint8_t> bytes(static_cast<size_t>(t.numel()) * 4);
      auto* f = reinterpret_cast<float*>(bytes.data());
      for (int64_t i = 0; i < t.numel(); ++i) f[i] = dist(gen);
      groups[g] = Value::tensor(Tensor::from_bytes(DType::F32, t.shape, std::move(bytes)));
    }
    write_torch_file(path, root);
  }
  return dst;
}

}  // namespace ckptdoc::test
