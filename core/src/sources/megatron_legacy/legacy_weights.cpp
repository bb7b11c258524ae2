// The export's weights of a legacy Megatron save (legacy_weights.h).
#include "legacy_weights.h"

#include <algorithm>
#include <cstring>

#include "ckptdoc/error.h"
#include "legacy_pipeline.h"

namespace ckptdoc::megatron_legacy {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The ranks' pieces of one param concatenated along `axis`, row-major, produced when written.
Tensor merged(const std::vector<Tensor>& parts, int axis) {
  std::vector<int64_t> shape = parts[0].shape;
  shape[static_cast<size_t>(axis)] = 0;
  for (const auto& p : parts) shape[static_cast<size_t>(axis)] += p.shape[static_cast<size_t>(axis)];
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  const DType dtype = parts[0].dtype;
  return Tensor::produced(dtype, shape, [parts, outer](ByteSink& sink) {
    std::vector<std::vector<uint8_t>> bytes;
    bytes.reserve(parts.size());
    for (const auto& p : parts) bytes.push_back(p.to_bytes());
    for (int64_t o = 0; o < outer; ++o)
      for (const auto& b : bytes) {
        const size_t run = b.size() / static_cast<size_t>(outer);
        sink.write(std::span<const uint8_t>(b.data() + static_cast<size_t>(o) * run, run));
      }
  });
}

}  // namespace

int tp_axis(const std::string& name) {
  for (const char* col : {"embedding.word_embeddings.weight", "self_attention.linear_qkv.weight",
                          "self_attention.linear_qkv.bias", "mlp.linear_fc1.weight", "mlp.linear_fc1.bias",
                          "output_layer.weight", "output_layer.bias"})
    if (ends_with(name, col)) return 0;
  for (const char* row : {"self_attention.linear_proj.weight", "mlp.linear_fc2.weight"})
    if (ends_with(name, row)) return 1;
  return -1;
}

namespace {

// One pipeline stage's weights: its tensor-parallel ranks (`at`, in tp order) merged, or taken once when
// replicated.
LegacyWeights merge_tensor_parallel(const LegacyFolder& folder, const std::vector<RankContent>& ranks,
                                    const std::vector<size_t>& at) {
  const auto& first = ranks[at.front()];
  const auto& first_file = folder.ranks[at.front()];
  LegacyWeights w;
  const size_t tp = at.size();
  if (tp == 1) {
    w.tensors = first.model;
    return w;
  }
  if (first.swiglu)
    throw Error(
        ErrorKind::Unsupported, folder.dir, "",
        "was saved with --swiglu at tensor-parallel size " + std::to_string(tp) +
            ": each rank's linear_fc1 holds its halves of both GLU projections, which ckptdoc does not "
            "merge yet");
  for (size_t i = 0; i < first.model.size(); ++i) {
    const std::string& name = first.model[i].name;
    std::vector<Tensor> parts;
    for (const size_t r : at) {
      const auto& m = ranks[r].model;
      if (m.size() != first.model.size() || m[i].name != name)
        throw Error(ErrorKind::Inconsistent, folder.ranks[r].model_file, "",
                    "does not hold the same model tensors in the same order as " + first_file.shown +
                        " (at " + name + ")");
      if (m[i].tensor.dtype != first.model[i].tensor.dtype ||
          m[i].tensor.shape.size() != first.model[i].tensor.shape.size())
        throw Error(ErrorKind::Inconsistent, folder.ranks[r].model_file, "",
                    name + ": another dtype or rank than in " + first_file.shown);
      parts.push_back(m[i].tensor);
    }
    const int axis = tp_axis(name);
    if (axis >= 0 && static_cast<size_t>(axis) < first.model[i].tensor.shape.size()) {
      for (size_t r = 1; r < tp; ++r)
        for (size_t d = 0; d < parts[0].shape.size(); ++d)
          if (static_cast<int>(d) != axis && parts[r].shape[d] != parts[0].shape[d])
            throw Error(ErrorKind::Inconsistent, folder.ranks[at[r]].model_file, "",
                        name + ": its piece's shape does not fit " + first_file.shown + "'s along axis " +
                            std::to_string(axis));
      w.tensors.push_back({name, merged(parts, axis)});
      ++w.merged;
      continue;
    }
    const auto bytes = parts[0].to_bytes();
    for (size_t r = 1; r < tp; ++r)
      if (parts[r].shape != parts[0].shape || parts[r].to_bytes() != bytes)
        throw Error(
            ErrorKind::Unsupported, folder.ranks[at[r]].model_file, "",
            name + " differs from " + first_file.shown +
                "'s, and ckptdoc does not know the tensor-parallel axis of this param: not merged on a "
                "guess");
    w.tensors.push_back(first.model[i]);
    ++w.replicated;
  }
  return w;
}

}  // namespace

LegacyWeights select_weights(const LegacyFolder& folder, const std::vector<RankContent>& ranks) {
  for (size_t r = 0; r < ranks.size(); ++r)
    if (!ranks[r].readable())
      throw Error(ranks[r].error_kind == ErrorKind::Other ? ErrorKind::Corrupt : ranks[r].error_kind,
                  folder.ranks[r].model_file, "",
                  "cannot be read, so its weights cannot be exported: " + ranks[r].error);
  const auto& first = ranks.front();
  for (size_t r = 0; r < ranks.size(); ++r)
    if (ranks[r].model_key != "model")
      throw Error(ErrorKind::Unsupported, folder.ranks[r].model_file, "",
                  ranks[r].model_key.empty()
                      ? "holds no \"model\" dict: no weights to export"
                      : "holds a virtual pipeline's model chunks (model0, ...): not exported yet");
  if (first.ep_size > 1)
    throw Error(ErrorKind::Unsupported, folder.dir, "",
                "is an expert-parallel save (expert " + std::to_string(first.ep_size) +
                    "): ckptdoc does not merge expert ranks yet");
  const auto tp = static_cast<size_t>(std::max(first.tp_size, 1));
  const auto pp = static_cast<size_t>(std::max(first.pp_size, 1));
  if (ranks.size() != tp * pp)
    throw Error(ErrorKind::Inconsistent, folder.dir, "",
                "holds " + std::to_string(ranks.size()) + " mp_rank_* folders, its args say tensor " +
                    std::to_string(tp) + " x pipeline " + std::to_string(pp));
  // Each stage's rank files in tensor-parallel order (place_ranks set tp and pp from the names).
  std::vector<std::vector<size_t>> stages(pp, std::vector<size_t>(tp, ranks.size()));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto& f = folder.ranks[r];
    if (f.tp < 0 || f.pp < 0 || static_cast<size_t>(f.tp) >= tp || static_cast<size_t>(f.pp) >= pp ||
        stages[static_cast<size_t>(f.pp)][static_cast<size_t>(f.tp)] != ranks.size())
      throw Error(ErrorKind::Inconsistent, f.model_file, "",
                  "its folder name does not place it on one free tensor x pipeline rank of " +
                      std::to_string(tp) + " x " + std::to_string(pp));
    stages[static_cast<size_t>(f.pp)][static_cast<size_t>(f.tp)] = r;
  }
  if (pp == 1) return merge_tensor_parallel(folder, ranks, stages.front());
  LegacyWeights w;
  std::vector<Stage> parts;
  for (const auto& at : stages) {
    auto s = merge_tensor_parallel(folder, ranks, at);
    w.merged += s.merged;
    w.replicated += s.replicated;
    parts.push_back({folder.ranks[at.front()].shown, std::move(s.tensors)});
  }
  auto joined = join_stages(folder.dir, std::move(parts), first.num_layers);
  w.tensors = std::move(joined.tensors);
  w.stages = pp;
  w.renumbered = joined.renamed;
  return w;
}

}  // namespace ckptdoc::megatron_legacy
