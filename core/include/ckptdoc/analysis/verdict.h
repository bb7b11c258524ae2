#pragma once
// The one sentence every front end leads a diagnosis with, built from what was actually compared: "No
// problems found" only when something was checked and nothing of warning level or worse came of it, and
// always with what the verdict rests on ("the fp32 masters of 40 params compared with their fp16 weights
// ...").
#include <string>
#include <vector>

#include "ckptdoc/analysis/report.h"
#include "ckptdoc/model/catalog.h"

namespace ckptdoc::analysis {

enum class VerdictKind : uint8_t {
  Problems,         // an error or warning finding
  Clean,            // something was compared or scanned, and no error or warning came of it
  NothingCompared,  // no error or warning, but no master was compared with a weight (ZeRO-3 without 16-bit
                    // weights) or nothing was scanned at all: never called "no problems"
};

struct Verdict {
  VerdictKind kind = VerdictKind::NothingCompared;
  std::string headline;                  // one line: "No problems found." / "1 error, 2 warnings." / ...
  std::string basis;                     // what was compared and checked, in words
  std::vector<std::string> not_checked;  // what this diagnosis could not look at, each in words
  size_t masters_compared = 0;           // params whose fp32 master was compared with their lp weight
  size_t moments_checked = 0;            // params whose Adam moments were read
  size_t tensors_scanned = 0;            // params or weights tensors whose values were read at all
};

Verdict verdict_of(const Report& report, const model::Catalog& catalog);

}  // namespace ckptdoc::analysis
