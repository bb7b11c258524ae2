#include "sources/checkpoint/zero3_universal.h"

#include "ckptdoc/error.h"
#include "ckptdoc/model/catalog.h"
#include "ckptdoc/sources/deepspeed/layout.h"
#include "sources/deepspeed/value_access.h"

namespace ckptdoc::universal::detail {

using deepspeed::detail::dict_get;
using deepspeed::detail::int_key;
using deepspeed::detail::list_at;

namespace {

[[noreturn]] void refuse(const model::Catalog& cat, const std::string& why) {
  throw Error(ErrorKind::Unsupported, cat.tag_dir, "", why);
}

const Value* torch_optimizer_state(const deepspeed::Checkpoint& ckpt) {
  return dict_get(&ckpt.optimizer_state(0), "optimizer_state_dict");
}

}  // namespace

void check_zero3_input(const deepspeed::Checkpoint& ckpt, const TargetVersion& target) {
  const auto& cat = ckpt.catalog();
  if (cat.topology.tp > 1 || cat.topology.mp_world_size > 1)
    refuse(
        cat,
        "a tensor-parallel ZeRO-3 checkpoint (tp " + std::to_string(cat.topology.tp) +
            ") is not converted to universal: ckptdoc converts data-parallel ZeRO-3 only (DeepSpeed 0.19's "
            "ds_to_universal.py merges ZeRO-3 tensor-parallel slices)");
  if (!cat.frozen_params.empty())
    refuse(
        cat,
        "ZeRO-3 with frozen params ('" + cat.frozen_params.front().name + "'" +
            (cat.frozen_params.size() > 1 ? " and " + std::to_string(cat.frozen_params.size() - 1) + " more"
                                          : "") +
            ") is not converted to universal: DeepSpeed 0.19's ZeRO-3 converter writes nothing for them "
            "and its loader leaves them at the values the new job builds, so they would be lost");
  const auto v = deepspeed::parse_ds_version(target.version);
  if (!v || *v < deepspeed::DsVersion{0, 19, 0})
    refuse(cat,
           "ZeRO-3 universal checkpoints are written for DeepSpeed 0.19 or later, and the target is " +
               target.version +
               " (--for-deepspeed, by default the checkpoint's version): the ZeRO-3 universal loaders of "
               "0.14.5 and 0.17.6 restore only the first sub-group's masters and moments, and 0.12.6 has "
               "none. Pass --for-deepspeed 0.19.0 (or the later version the job loads with)");
  // 0.19's loader reads the step of every sub-group from rank 0's state[0]['step'] and fails without it.
  const Value* step = dict_get(int_key(dict_get(torch_optimizer_state(ckpt), "state"), 0), "step");
  if (!step)
    refuse(cat,
           "dp rank 0's optimizer_state_dict['state'][0] has no 'step' (an optimizer that keeps it in "
           "the param group, such as FusedAdam): DeepSpeed's ZeRO-3 universal loader reads the Adam step "
           "only from there, so it could not load the output");
}

Value zero3_optimizer_state_root(const deepspeed::Checkpoint& ckpt) {
  const Value* pg = dict_get(torch_optimizer_state(ckpt), "param_groups");
  if (!pg)
    throw Error(ErrorKind::Corrupt, ckpt.catalog().tag_dir, "dp rank 0",
                "optimizer_state_dict['optimizer_state_dict'] has no param_groups");
  Value out = ckpt.optimizer_state(0).clone();
  out.set("param_groups", pg->clone());
  return out;
}

std::vector<std::string> zero3_load_notes(const deepspeed::Checkpoint& ckpt) {
  std::vector<std::string> notes;
  const Value* pg = dict_get(torch_optimizer_state(ckpt), "param_groups");
  const Value* first = list_at(pg, 0);
  for (size_t g = 1; first && list_at(pg, g); ++g) {
    const Value* other = list_at(pg, g);
    if (!other->is_dict()) break;
    for (const auto& [k, v] : deepspeed::detail::str_items(first)) {
      if (k == "params") continue;
      const Value* w = other->get(k);
      if (w && w->equals(*v)) continue;
      notes.push_back("param group " + std::to_string(g) + "'s '" + k +
                      "' differs from group 0's: DeepSpeed 0.19's ZeRO-3 universal loader gives every param "
                      "group the hyper-parameters of group 0, so set them again after loading");
      return notes;
    }
  }
  return notes;
}

}  // namespace ckptdoc::universal::detail
