#pragma once
// The one finding type (#27): what a source finds while reading a checkpoint (the DeepSpeed catalog's
// problems, a weights folder's, a DCP folder's) and what a diagnosis concludes (the analysis rules, a live
// snapshot) are the same record, so a problem becomes a finding without a copy and every front end draws one
// type. Its code is one of the code table's (finding_codes.h), which gives its default severity and repair.
#include <map>
#include <string>
#include <vector>

#include "ckptdoc/model/finding_codes.h"

namespace ckptdoc::model {

struct Finding {
  Finding() = default;
  // A finding of `code` with the code table's severity and repair; a site that reports another repair sets it
  // after and says why.
  Finding(Code code, std::string message = {}, std::string file = {}, std::vector<int> ranks = {},
          std::vector<std::string> params = {});
  // The same with another severity than the table's: for a site whose rule escalates or de-escalates (it says
  // why).
  Finding(Code code, Severity severity, std::string message, std::string file = {},
          std::vector<int> ranks = {}, std::vector<std::string> params = {});

  std::string code;  // code_name() of a Code, e.g. "fp32-master-mismatch"
  Severity severity = Severity::Info;
  std::string message;    // what happened and what to do, in plain words
  std::string file = {};  // the one file a source's problem concerns, relative to its folder; or empty
  std::string key = {};   // the state-dict key concerned (DCP), or empty
  std::vector<std::string> params = {};
  std::vector<int> ranks = {};
  std::map<std::string, double> evidence = {};  // named numbers backing it
  std::map<std::string, std::string> details =
      {};                                // named facts (unsafe-pickle: file, record, callable, how)
  RepairKind repair = RepairKind::None;  // the repair that fixes it (the Fix button)
  // Tensor/pipeline-parallel jobs: the model-parallel rank it concerns (ranks are that rank's dp ranks);
  // -1: the whole job or a data-parallel one.
  int pp = -1, tp = -1;
  std::string not_checked = {};  // what the verdict could not check because of it (listed there)
  // The files a diagnosis found it in (an analysis rule's, e.g. the ranks' files of stale masters); a
  // source's problem names its one `file` instead.
  std::vector<std::string> files = {};

  std::vector<std::string> named_files() const;  // `file` (when set), then `files`: diagnose --json's "files"
};

}  // namespace ckptdoc::model
