#pragma once
// The opt-in integrity pass of diagnose: every zip record of every checkpoint file against the CRC-32 torch
// stored in its central directory. A flipped bit inside a tensor leaves a file that parses and values that
// look plausible; only the checksum shows it.
#include <vector>

#include "ckptdoc/sources/deepspeed/catalog.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::deepspeed::detail {

// One "checksum-mismatch" (error) problem per file with bad records, naming the records. Files that are not
// zip archives (legacy torch.save) have no checksums and are skipped; unreadable files are left to the
// catalog's own problems. Throws Cancelled when progress->cancel() was called.
std::vector<Problem> verify_checksums(const Catalog& catalog, unsigned threads, Progress* progress);

}  // namespace ckptdoc::deepspeed::detail
