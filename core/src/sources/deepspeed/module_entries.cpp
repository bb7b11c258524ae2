#include "sources/deepspeed/module_entries.h"

#include "ckptdoc/number_text.h"
#include "sources/deepspeed/catalog_topology.h"

namespace ckptdoc::deepspeed::detail {

namespace {

const CheckpointFile* layer_file(const Catalog& cat, int layer) {
  for (const auto& f : cat.files)
    if (f.role == FileRole::Layer && f.layer == layer && std::max(f.tp, 0) == cat.tp_rank) return &f;
  return nullptr;
}

const CheckpointFile* expert_file(const Catalog& cat, int layer, int expert) {
  for (const auto& f : cat.files)
    if (f.role == FileRole::Expert && f.expert == expert && f.mp_rank == cat.mp_rank &&
        (f.layer == layer || (f.layer < 0 && cat.topology.legacy_expert_files)))
      return &f;
  return nullptr;
}

}  // namespace

std::optional<EntryLocation> locate_module_entry(const Catalog& cat, const std::string& name) {
  const Topology& t = cat.topology;
  if (t.moe()) {
    if (const auto [layer, expert] = expert_of(t, name); layer >= 0) {
      const CheckpointFile* f = expert_file(cat, layer, expert);
      if (!f) return std::nullopt;
      return EntryLocation{f, name, false};
    }
  }
  if (t.pipeline) {
    if (const int layer = pipeline_layer_of(name); layer >= 0) {
      const CheckpointFile* f = layer_file(cat, layer);
      if (!f) return std::nullopt;
      return EntryLocation{f, name.substr(name.find('.') + 1), false};
    }
    if (const auto it = cat.lp_locations.find(name);
        it != cat.lp_locations.end())  // tied modules: where found
      for (const auto& f : cat.files)
        if (f.path == it->second.file) return EntryLocation{&f, it->second.key, f.role == FileRole::Model};
    return std::nullopt;
  }
  const CheckpointFile* mf = cat.metadata_model_file();
  if (!mf) return std::nullopt;
  return EntryLocation{mf, name, true};
}

std::string expected_entry_file(const Catalog& cat, const std::string& name) {
  const Topology& t = cat.topology;
  if (t.moe())
    if (const auto [layer, expert] = expert_of(t, name); layer >= 0)
      return t.legacy_expert_files ? "expert_" + std::to_string(expert) + "_mp_rank_" +
                                         two_digits(cat.mp_rank) + "_model_states.pt"
                                   : "layer_" + std::to_string(layer) + "_expert_" + std::to_string(expert) +
                                         "_mp_rank_" + two_digits(cat.mp_rank) + "_model_states.pt";
  if (t.pipeline)
    if (const int layer = pipeline_layer_of(name); layer >= 0)
      return "layer_" + two_digits(layer) +
             (t.layer_files_named_by_tp ? "-model_" + two_digits(cat.tp_rank) : "") + "-model_states.pt";
  return "";
}

}  // namespace ckptdoc::deepspeed::detail
