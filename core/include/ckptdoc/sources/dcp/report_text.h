#pragma once
// The text forms of `ckptdoc inspect` and `diagnose` on a PyTorch Distributed Checkpoint (their JSON forms
// are metadata_json and report_json in diagnose.h).
#include <string>

#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/sources/dcp/diagnose.h"

namespace ckptdoc::dcp {

// The metadata alone: keys, files, and the problems .metadata shows without reading an item.
std::string inspect_text(const Checkpoint& ckpt);
// The verdict, the problems and what was not checked.
std::string diagnose_text(const Checkpoint& ckpt, const Report& report);

}  // namespace ckptdoc::dcp
