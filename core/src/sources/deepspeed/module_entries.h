#pragma once
// Where a module state-dict entry (a param's 16-bit weight, a buffer, a frozen param) of one model-parallel
// rank is stored: the model file's `module` (data- and tensor-parallel jobs), a pipeline layer file
// (layer_XX[-model_YY]-model_states.pt, keyed without the "XX." prefix) or an MoE expert file
// (layer_L_expert_E_mp_rank_XX_model_states.pt, keyed by the global expert name). deepspeed-format.md §8.
#include <optional>
#include <string>

#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::deepspeed::detail {

struct EntryLocation {
  const CheckpointFile* file = nullptr;
  std::string key;
  bool in_module =
      false;  // under the model file's 'module' key (else the file's root dict is the state dict)
};

// nullopt when the file that should hold it is absent. Tied pipeline modules ("tied_modules.*") are found
// only where the catalog recorded them (Catalog::lp_locations).
std::optional<EntryLocation> locate_module_entry(const Catalog& cat, const std::string& name);

// The name of the file that should hold `name` (for messages when it is absent); "" when unknown.
std::string expected_entry_file(const Catalog& cat, const std::string& name);

}  // namespace ckptdoc::deepspeed::detail
