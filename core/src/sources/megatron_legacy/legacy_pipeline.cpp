// A pipeline save's stages joined with global layer numbers (legacy_pipeline.h).
#include "legacy_pipeline.h"

#include <map>
#include <optional>
#include <set>

#include "ckptdoc/error.h"

namespace ckptdoc::megatron_legacy {
namespace {

constexpr std::string_view kLayers = "decoder.layers.";

// The layer number of "decoder.layers.<n>.rest" and where "rest" starts; nullopt for any other name.
std::optional<std::pair<int, size_t>> layer_of(const std::string& name) {
  if (name.compare(0, kLayers.size(), kLayers) != 0) return std::nullopt;
  size_t at = kLayers.size();
  int n = 0;
  const size_t digits = at;
  while (at < name.size() && name[at] >= '0' && name[at] <= '9' && at - digits < 6)
    n = n * 10 + (name[at++] - '0');
  if (at == digits || at >= name.size() || name[at] != '.') return std::nullopt;
  return std::pair{n, at};
}

Error refuse(const std::string& where, const std::string& why) {
  return Error(ErrorKind::Unsupported, where, "",
               why + ": the pipeline stages are not joined on a guess, nothing was written");
}

}  // namespace

JoinedStages join_stages(const std::string& dir, std::vector<Stage> stages, int num_layers) {
  JoinedStages out;
  std::map<std::string, std::string> owner;  // global name -> the stage file holding it
  int offset = 0;
  for (auto& stage : stages) {
    std::set<int> layers;
    for (const auto& t : stage.tensors)
      if (const auto l = layer_of(t.name)) layers.insert(l->first);
    if (!layers.empty() && (*layers.begin() != 0 || *layers.rbegin() != static_cast<int>(layers.size()) - 1))
      throw refuse(stage.shown, "its layers are numbered " + std::to_string(*layers.begin()) + ".." +
                                    std::to_string(*layers.rbegin()) +
                                    " with gaps, not 0..n-1 as a stage's own");
    out.offsets.push_back(offset);
    for (auto& t : stage.tensors) {
      if (const auto l = layer_of(t.name); l && offset > 0) {
        t.name = std::string(kLayers) + std::to_string(offset + l->first) + t.name.substr(l->second);
        ++out.renamed;
      }
      if (const auto [it, fresh] = owner.emplace(t.name, stage.shown); !fresh)
        throw refuse(stage.shown, t.name + " is also held by " + it->second);
      out.tensors.push_back(std::move(t));
    }
    offset += static_cast<int>(layers.size());
  }
  if (num_layers > 0 && offset != num_layers)
    throw refuse(dir, "its stages hold " + std::to_string(offset) + " layers, its args say num_layers " +
                          std::to_string(num_layers));
  return out;
}

}  // namespace ckptdoc::megatron_legacy
