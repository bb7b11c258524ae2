#pragma once
// `ckptdoc repair` of a legacy Megatron save: one of --refresh-fp32 (legacy_refresh.h), --reset-optimizer
// (legacy_reset.h) or --drop-optimizer (legacy_drop.h), each into a new folder, and what it did said in text
// or JSON.
#include "ckptdoc/sources/source.h"

namespace ckptdoc::megatron_legacy {

// Throws ckptdoc::Error Unsupported naming what was asked when it is not exactly one of those actions, and
// the errors of the action.
sources::Outcome repair(const sources::RepairRequest& request);

}  // namespace ckptdoc::megatron_legacy
