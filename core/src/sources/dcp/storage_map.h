#pragma once
// A DCP folder's storage map and diagnosis in the views' neutral terms (sources/storage_map.h), for the dcp,
// accelerate and megatron sources.
#include <string>
#include <vector>

#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/sources/dcp/diagnose.h"
#include "ckptdoc/sources/storage_map.h"

namespace ckptdoc::dcp {

// Adds `ckpt`'s files and keys to `map`, each file named `prefix` + its name ("optimizer_0/" for a part of a
// larger folder, "" for the folder itself). Reads the metadata and the files' sizes, never their bytes.
void add_to_storage_map(const Checkpoint& ckpt, const std::string& prefix, sources::StorageMap& map);
// The files by name (after every part was added).
void sort_storage_map(sources::StorageMap& map);

// A problem as a view's finding: code, severity and message as diagnose --json writes them, the file and key
// in `files` / `params`.
analysis::Finding finding_of_problem(const Problem& problem);
sources::SourceDiagnosis diagnosis_of(const std::vector<Problem>& problems, const std::string& verdict,
                                      bool clean, const std::vector<std::string>& not_checked);

}  // namespace ckptdoc::dcp
