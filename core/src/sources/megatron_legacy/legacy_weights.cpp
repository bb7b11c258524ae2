// The export's weights of a legacy Megatron save (legacy_weights.h).
#include "legacy_weights.h"

#include <cstring>

#include "ckptdoc/error.h"

namespace ckptdoc::megatron_legacy {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The axis megatron-core splits a GPT param on over tensor-parallel ranks (0.18.0: tensor_parallel/layers.py
// VocabParallelEmbedding and ColumnParallelLinear shard axis 0, RowParallelLinear's weight axis 1, through
// make_sharded_tensors_for_checkpoint / make_tp_sharded_tensor_for_checkpoint); -1: replicated (layer norms,
// position embeddings, RowParallelLinear's bias).
int tp_axis(const std::string& name) {
  for (const char* col : {"embedding.word_embeddings.weight", "self_attention.linear_qkv.weight",
                          "self_attention.linear_qkv.bias", "mlp.linear_fc1.weight", "mlp.linear_fc1.bias",
                          "output_layer.weight", "output_layer.bias"})
    if (ends_with(name, col)) return 0;
  for (const char* row : {"self_attention.linear_proj.weight", "mlp.linear_fc2.weight"})
    if (ends_with(name, row)) return 1;
  return -1;
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

LegacyWeights select_weights(const LegacyFolder& folder, const std::vector<RankContent>& ranks) {
  for (size_t r = 0; r < ranks.size(); ++r)
    if (!ranks[r].readable())
      throw Error(ranks[r].error_kind == ErrorKind::Other ? ErrorKind::Corrupt : ranks[r].error_kind,
                  folder.ranks[r].model_file, "",
                  "cannot be read, so its weights cannot be exported: " + ranks[r].error);
  const auto& first = ranks.front();
  if (first.model_key != "model")
    throw Error(ErrorKind::Unsupported, folder.ranks.front().model_file, "",
                first.model_key.empty()
                    ? "holds no \"model\" dict: no weights to export"
                    : "holds a virtual pipeline's model chunks (model0, ...): not exported yet");
  if (first.pp_size > 1 || first.ep_size > 1)
    throw Error(
        ErrorKind::Unsupported, folder.dir, "",
        "is a pipeline- or expert-parallel save (pipeline " + std::to_string(first.pp_size) + ", expert " +
            std::to_string(first.ep_size) +
            "): each stage numbers its layers from 0, and ckptdoc does not renumber or merge them yet");
  const size_t tp = ranks.size();
  if (static_cast<int>(tp) != first.tp_size)
    throw Error(ErrorKind::Inconsistent, folder.dir, "",
                "holds " + std::to_string(tp) +
                    " mp_rank_* folders, its args say tensor_model_parallel_size " +
                    std::to_string(first.tp_size));
  LegacyWeights w;
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
    for (size_t r = 0; r < tp; ++r) {
      const auto& m = ranks[r].model;
      if (m.size() != first.model.size() || m[i].name != name)
        throw Error(ErrorKind::Inconsistent, folder.ranks[r].model_file, "",
                    "does not hold the same model tensors in the same order as " + folder.ranks[0].shown +
                        " (at " + name + ")");
      if (m[i].tensor.dtype != first.model[i].tensor.dtype ||
          m[i].tensor.shape.size() != first.model[i].tensor.shape.size())
        throw Error(ErrorKind::Inconsistent, folder.ranks[r].model_file, "",
                    name + ": another dtype or rank than in " + folder.ranks[0].shown);
      parts.push_back(m[i].tensor);
    }
    const int axis = tp_axis(name);
    if (axis >= 0 && static_cast<size_t>(axis) < first.model[i].tensor.shape.size()) {
      for (size_t r = 1; r < tp; ++r)
        for (size_t d = 0; d < parts[0].shape.size(); ++d)
          if (static_cast<int>(d) != axis && parts[r].shape[d] != parts[0].shape[d])
            throw Error(ErrorKind::Inconsistent, folder.ranks[r].model_file, "",
                        name + ": its piece's shape does not fit " + folder.ranks[0].shown +
                            "'s along axis " + std::to_string(axis));
      w.tensors.push_back({name, merged(parts, axis)});
      ++w.merged;
      continue;
    }
    const auto bytes = parts[0].to_bytes();
    for (size_t r = 1; r < tp; ++r)
      if (parts[r].shape != parts[0].shape || parts[r].to_bytes() != bytes)
        throw Error(
            ErrorKind::Unsupported, folder.ranks[r].model_file, "",
            name + " differs from " + folder.ranks[0].shown +
                "'s, and ckptdoc does not know the tensor-parallel axis of this param: not merged on a "
                "guess");
    w.tensors.push_back(first.model[i]);
    ++w.replicated;
  }
  return w;
}

}  // namespace ckptdoc::megatron_legacy
