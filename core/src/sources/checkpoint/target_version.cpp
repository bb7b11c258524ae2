// Which universal checkpoint layout each DeepSpeed version's loader reads (deepspeed-format.md §7.3), from
// the DeepSpeed history: PR #4588 (0.12.3) set the step from client_state['iteration'] + 1; PR #5104 (0.13.2)
// dropped the optimizer step at initialisation, which left the universal loader no Adam state to fill until
// PR #5263 (0.14.1); PR #5289 (0.14.1) moved the step into step.pt and the hyper-parameters into
// optimizer_state.pt['param_groups'] and made the mpu optional.
#include "ckptdoc/error.h"
#include "ckptdoc/sources/checkpoint/convert.h"
#include "ckptdoc/sources/deepspeed/layout.h"

namespace ckptdoc::universal {

TargetVersion target_version(const std::string& ds_version) {
  using deepspeed::DsVersion;
  const auto v = deepspeed::parse_ds_version(ds_version);
  if (!v)
    throw Error(ErrorKind::InvalidRequest, "", "DeepSpeed version",
                expected_found("a version such as 0.14.5", "'" + ds_version + "'"));
  TargetVersion t;
  t.version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  if (*v < DsVersion{0, 12, 3})
    throw Error(ErrorKind::Unsupported, "", "DeepSpeed " + t.version,
                "its universal loader does not restore the optimizer step (that came in 0.12.3); pass "
                "--for-deepspeed with the version the job will load with (0.12.3 or later)");
  t.loader = *v < DsVersion{0, 14, 1} ? LoaderKind::Iteration : LoaderKind::StepFiles;
  t.module_entries = *v >= DsVersion{0, 19, 0};  // seen in 0.19.8's converter; absent from 0.14.5's
  if (t.loader == LoaderKind::Iteration)
    t.caveats.push_back(
        "DeepSpeed " + t.version +
        "'s universal loader for ZeRO-1/2 and BF16_Optimizer asks the "
        "engine's mpu for the tensor-parallel size: pass deepspeed.initialize(..., mpu=...) an object "
        "whose get_tensor_model_parallel_rank/world_size (and get_slice_parallel_world_size for "
        "BF16_Optimizer) give 0 and 1 in a data-parallel-only job");
  if (*v >= DsVersion{0, 13, 2} && *v < DsVersion{0, 14, 1})
    t.caveats.push_back(
        "DeepSpeed 0.13.2-0.14.0 no longer take an optimizer step at initialisation, so their "
        "universal loader finds no Adam state to fill: the fp32 masters load but the moments and "
        "the step restart (fixed in 0.14.1); load with 0.14.1+ to keep them");
  return t;
}

}  // namespace ckptdoc::universal
