// Catalog building, part 5: rank files whose names do not say what they are (renamed, or copied out of their
// folder), recognised by their content, given the rank their content tells (or, when it does not, the free
// ranks in name order), and reported with the name DeepSpeed's load_checkpoint looks for.
#include <algorithm>
#include <set>

#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/writer.h"
#include "sources/deepspeed/catalog_builder.h"
#include "sources/deepspeed/content_roles.h"

namespace ckptdoc::deepspeed {

using namespace detail;

namespace {

int first_free(const std::set<int>& taken) {
  int r = 0;
  while (taken.count(r)) ++r;
  return r;
}

constexpr const char* kByOrder = "assumed from the order of the names: the file does not record its rank";

}  // namespace

void CatalogBuilder::recognise_by_content() {
  std::set<int> optim_ranks, zero3_model_ranks;
  bool model_mp0 = false;
  for (const auto& f : cat_.files) {
    if (f.role == FileRole::Optim && f.mp_rank == 0) optim_ranks.insert(f.dp_rank);
    if (f.role == FileRole::Model && f.mp_rank == 0) {
      if (f.dp_rank >= 0)
        zero3_model_ranks.insert(f.dp_rank);
      else
        model_mp0 = true;
    }
  }
  bool changed = false;
  for (auto& f : cat_.files) {
    if (f.role != FileRole::Other || f.bytes == 0) continue;
    std::optional<ContentRole> c;
    if (classify_file_by_content_head(f.abs_path)) {
      try {
        c = classify_by_content(ck_.open_cached(f.abs_path));  // parsed once, kept for the rest of the build
      } catch (const std::exception&) {
        continue;  // unreadable: not recognisable either
      }
    }
    if (!c) continue;
    if (c->role == FileRole::Optim) {
      f.dp_rank = first_free(optim_ranks);
      optim_ranks.insert(f.dp_rank);
      f.bf16_prefix = c->bf16_optimizer;
    } else if (c->zero3) {
      f.dp_rank = first_free(zero3_model_ranks);
      zero3_model_ranks.insert(f.dp_rank);
    } else if (!model_mp0) {
      model_mp0 = true;  // one model-states file per mp rank; a second one stays an unknown file
    } else {
      continue;
    }
    f.role = c->role;
    f.mp_rank = 0;
    renamed_[f.path] = kByOrder;
    changed = true;
  }
  if (changed) sort_files(cat_.files);
}

// ZeRO-1/2 and BF16_Optimizer files record which fragments their partition holds (param_slice_mappings): the
// rank whose layout gives exactly those is the file's rank.
void CatalogBuilder::identify_renamed_ranks() {
  if (renamed_.empty() || cat_.groups.empty() || zero12_rules_for_version(cat_.ds_version).round_robin)
    return;
  if (cat_.wrapper != OptimizerWrapper::Zero12 && cat_.wrapper != OptimizerWrapper::BF16Optimizer) return;
  const GroupLayout& g0 = cat_.groups.front();
  auto told_rank = [&](const OptimRankScan& s) -> int {
    if (!s.has_slice_mappings || s.slice_mappings.empty()) return -1;
    std::set<std::tuple<std::string, int64_t, int64_t>> got;
    for (const auto& m : s.slice_mappings.front()) got.insert({m.name, m.numel, m.start});
    for (const auto& rp : g0.partitions) {
      std::set<std::tuple<std::string, int64_t, int64_t>> want;
      for (const auto& m : expected_slice_mappings(g0, rp.rank)) want.insert({m.name, m.numel, m.start});
      if (want == got) return rp.rank;
    }
    return -1;
  };
  auto file_at = [&](int rank) -> CheckpointFile* {
    for (auto& f : cat_.files)
      if (f.role == FileRole::Optim && f.mp_rank == 0 && f.dp_rank == rank) return &f;
    return nullptr;
  };
  bool moved = false;
  for (int pass = 0; pass < 2; ++pass) {  // a swap may free the place another renamed file belongs in
    for (auto& f : cat_.files) {
      if (f.role != FileRole::Optim || f.mp_rank != 0 || !renamed_.count(f.path) || !optim_.count(f.dp_rank))
        continue;
      const int want = told_rank(optim_.at(f.dp_rank));
      if (want < 0) continue;
      renamed_[f.path] = "told by its param_slice_mappings";
      if (want == f.dp_rank) continue;
      CheckpointFile* other = file_at(want);
      if (other && !renamed_.count(other->path)) {
        renamed_[f.path] = "its param_slice_mappings say rank " + std::to_string(want) + ", which " +
                           other->path + " already is; " + kByOrder;
        continue;
      }
      const int from = f.dp_rank;
      std::swap(optim_[from], optim_[want]);  // creates the entry for `want` when no file held it
      if (!optim_[from].file) optim_.erase(from);
      optim_[want].dp_rank = want;
      if (optim_.count(from)) optim_[from].dp_rank = from;
      if (other) other->dp_rank = from;
      f.dp_rank = want;
      moved = true;
    }
  }
  if (moved) sort_files(cat_.files);
}

void CatalogBuilder::report_renamed() {
  for (const auto& f : cat_.files) {
    const auto it = renamed_.find(f.path);
    if (it == renamed_.end()) continue;
    std::string expected;
    if (f.role == FileRole::Optim) {
      expected = optim_file_name(f.bf16_prefix, f.dp_rank, f.mp_rank);
    } else {
      expected = model_file_name(f.dp_rank >= 0 ? 3 : 2, std::max(f.dp_rank, 0), f.mp_rank);
    }
    const std::string what = f.role == FileRole::Optim ? "optimizer-states" : "model-states";
    std::vector<int> ranks;
    if (f.dp_rank >= 0) ranks.push_back(f.dp_rank);
    std::string message = f.path;  // appended piece by piece: this runs per renamed file
    message += " is a DeepSpeed ";
    message += what;
    message +=
        " file (recognised by its content) under a name DeepSpeed does not use: load_checkpoint looks for it "
        "as ";
    message += expected;
    if (f.dp_rank >= 0) {
      message += " (dp rank ";
      message += std::to_string(f.dp_rank);
      message += ", ";
      message += it->second;
      message += ")";
    }
    message += ". Rename it to that name; ckptdoc reads it as that file meanwhile.";
    Problem p{model::Code::RankFileRenamed, std::move(message), f.path, ranks};
    p.details = {{"file", f.path}, {"expected_name", expected}, {"rank_told_by", it->second}};
    cat_.problems.push_back(std::move(p));
  }
}

}  // namespace ckptdoc::deepspeed
