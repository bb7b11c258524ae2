#pragma once
// The DeepSpeed family's rules (model/source_rules.h): what only DeepSpeed's records tell (world sizes, the
// fp16 loss scale, which wrapper saves its optimizer state in files of its own, how its optimizer files are
// named, a universal folder's optimizer groups, how its masters go stale), for the neutral rules of
// analysis/rules.cpp to ask.
#include <memory>

#include "ckptdoc/sources/deepspeed/catalog.h"

namespace ckptdoc::deepspeed::detail {

// The rules of `catalog` as it stands: they keep a copy of what they read, so a copy of the catalog (a
// slice judged alone, a catalog merged across processes) may outlive it. Set again after a field they read
// changes.
std::shared_ptr<const model::SourceRules> rules_of(const Catalog& catalog);

}  // namespace ckptdoc::deepspeed::detail
