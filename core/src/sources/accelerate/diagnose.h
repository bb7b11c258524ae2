#pragma once
// `ckptdoc diagnose` of an Accelerate save_state folder: the DCP rules (sources/dcp/diagnose.h) on each
// model and optimizer part, problems named with the part's folder, each optimizer param checked against its
// model's keys, and the files beside the parts listed as not read (their pickles judged for what loading them
// would run: the "unsafe-pickle" finding, never executed).
#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/sources/dcp/diagnose.h"
#include "sources/accelerate/save_state.h"

namespace ckptdoc::accelerate {

struct PartReport {
  Part part;
  std::shared_ptr<dcp::Checkpoint> ckpt;  // null when the part could not be opened (its problem says why)
  dcp::Report report;
};

struct Report {
  SaveState layout;
  std::vector<PartReport> parts;
  std::vector<dcp::Problem> problems;  // every part's, `file` relative to the save_state folder; errors first
  size_t optimizer_params_matched = 0;  // optimizer params found among their model's keys
  size_t pickles_checked = 0;           // files beside the parts judged for pickle safety (values not read)
  bool clean = false;
  std::string verdict;
  std::vector<std::string> not_checked;
  bool has_error() const;
};

Report diagnose(const std::string& dir);
std::string report_text(const Report& report);
std::string report_json(const Report& report);

}  // namespace ckptdoc::accelerate
