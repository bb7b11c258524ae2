// Catalog building, part 4: pickle safety of every file in the tag folder (pickle_safety.h), as unsafe-pickle
// problems naming file, record, callable and how it is reached.
#include "ckptdoc/format/pickle_safety.h"
#include "ckptdoc/format/pickle_use_memo.h"
#include "ckptdoc/model/finding_codes.h"
#include "sources/deepspeed/catalog_builder.h"

namespace ckptdoc::deepspeed {

namespace {
constexpr size_t kHazardsPerFile = 20;  // one folder of hostile files must not flood the report
}  // namespace

void CatalogBuilder::check_pickle_safety() {
  // Every model-parallel rank lists the whole tag folder: rank 0's catalog (the job's) reports each file
  // once.
  if (cat_.mp_rank > 0) return;
  PickleUseMemo memo;  // ZeRO-3's per-rank model-states files, not read for the catalog, share their pickle
  for (const auto& f : cat_.files) {
    std::vector<PickleHazard> hazards;
    std::shared_ptr<TorchFile> parsed;  // already parsed for the catalog: its pickle's uses are known
    {
      std::lock_guard<std::mutex> lock(ck_.cache_->mutex);
      if (auto it = ck_.cache_->files.find(f.abs_path); it != ck_.cache_->files.end()) parsed = it->second;
    }
    if (parsed)
      hazards = assess_pickle_uses(parsed->pickle_uses, f.path);
    else
      hazards = pickle_hazards_of_file(f.abs_path, f.path, &memo);
    std::vector<int> ranks;
    if (f.dp_rank >= 0) ranks.push_back(f.dp_rank);
    for (size_t i = 0; i < hazards.size() && i < kHazardsPerFile; ++i) {
      const auto& h = hazards[i];
      // Severity: the hazard's own (pickle_safety.cpp grades each callable), not the table's default.
      Problem p(model::Code::UnsafePickle, model::severity_of(h.severity),
                h.message() + ". " + pickle_advice(h.severity), f.path, ranks);
      p.details = {{"file", f.path},
                   {"record", h.record},
                   {"callable", h.callable},
                   {"how", h.how},
                   {"rule", h.why},
                   {"offset", std::to_string(h.offset)},
                   {"count", std::to_string(h.count)}};
      if (!h.reaches.empty()) p.details["reaches"] = h.reaches;
      cat_.problems.push_back(std::move(p));
    }
    if (hazards.size() > kHazardsPerFile)
      problem(model::Code::UnsafePickle,
              model::severity_of(worst_severity(  // the worst hazard's severity
                  {hazards.begin() + kHazardsPerFile, hazards.end()})),
              f.path + ": " + std::to_string(hazards.size() - kHazardsPerFile) +
                  " more imports and calls of the same kind (see `ckptdoc ls " + f.path + "`)",
              f.path, ranks);
  }
}

}  // namespace ckptdoc::deepspeed
