#include "damage_support.h"

#include <random>
#include <vector>

#include "ckptdoc/format/torch_file.h"

namespace ckptdoc::test {

void replace_fp32_masters_with_noise(const std::string& path, uint32_t seed) {
  Value root = TorchFile::open(path).root;
  auto& groups =
      root.get_mut("optimizer_state_dict")->get_mut("single_partition_of_fp32_groups")->items_mut();
  for (size_t g = 0; g < groups.size(); ++g) {
    const Tensor& t = groups[g].as_tensor();
    std::mt19937 gen(seed + static_cast<uint32_t>(g));
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<uint8_t> bytes(static_cast<size_t>(t.numel()) * 4);
    auto* f = reinterpret_cast<float*>(bytes.data());
    for (int64_t i = 0; i < t.numel(); ++i) f[i] = dist(gen);
    groups[g] = Value::tensor(Tensor::from_bytes(DType::F32, t.shape, std::move(bytes)));
  }
  write_torch_file(path, root);
}

std::string optim_file_of(const std::string& tag_dir, int rank) {
  return tag_dir + "/zero_pp_rank_" + std::to_string(rank) + "_mp_rank_00_optim_states.pt";
}

}  // namespace ckptdoc::test
