#include "ckptdoc/sources/deepspeed/rank_owners.h"

#include <cstdint>
#include <filesystem>

#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/model/finding_codes.h"

namespace fs = std::filesystem;

namespace ckptdoc::deepspeed {
namespace {

bool present(const CheckpointFile* f) {
  std::error_code ec;
  return f && fs::is_regular_file(f->abs_path, ec);
}

// "0, 2-5, 9": runs of three or more consecutive ranks as ranges, so 60000 missing ranks stay one short line.
std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    const auto part = j >= i + 2 ? std::to_string(v[i]) + "-" + std::to_string(v[j]) : std::to_string(v[i]);
    s += (s.empty() ? "" : ", ") + part;
    i = j >= i + 2 ? j + 1 : i + 1;
  }
  return s;
}

constexpr const char* kOptimPrefix = "optimizer-states file(s) of dp rank(s) ";
constexpr const char* kModelPrefix = "ZeRO-3 model-states file(s) of dp rank(s) ";

}  // namespace

RankOwners rank_owners(const Catalog& cat, int dp) {
  RankOwners o;
  o.procs = mpi_size();
  o.me = mpi_rank();
  const bool zero3 = cat.wrapper == OptimizerWrapper::Zero3;
  // Two bits per rank: has the optimizer file, has the (ZeRO-3) model file.
  std::vector<uint8_t> mine(static_cast<size_t>(std::max(dp, 0)), 0);
  for (int r = 0; r < dp; ++r)
    mine[static_cast<size_t>(r)] = static_cast<uint8_t>((present(cat.optim_file(r)) ? 1 : 0) |
                                                        (zero3 && present(cat.model_file(-1, r)) ? 2 : 0));
  std::vector<uint8_t> all(mine.size() * static_cast<size_t>(o.procs));
  mpi_allgather(mine.data(), mine.size(), all.data());
  std::vector<int> load(static_cast<size_t>(o.procs), 0);
  for (int r = 0; r < dp; ++r) {
    int best = -1;
    bool model_somewhere = false;
    for (int p = 0; p < o.procs; ++p) {
      const uint8_t bits = all[static_cast<size_t>(p) * mine.size() + static_cast<size_t>(r)];
      model_somewhere = model_somewhere || (bits & 2);
      if ((bits & 1) && (best < 0 || load[static_cast<size_t>(p)] < load[static_cast<size_t>(best)]))
        best = p;
    }
    o.owner.push_back(best);
    o.optim_nowhere.push_back(best < 0);
    o.model_nowhere.push_back(zero3 && !model_somewhere);
    if (best >= 0) ++load[static_cast<size_t>(best)];
  }
  return o;
}

Problem missing_optim_files_problem(const std::vector<int>& ranks, int dp) {
  return Problem(model::Code::RankFileMissing,
                 kOptimPrefix + join(ranks) + " missing (expected " + std::to_string(dp) +
                     " ranks); their fp32 partitions and optimizer moments are lost",
                 "", ranks);
}

Problem missing_zero3_model_files_problem(const std::vector<int>& ranks, int dp) {
  Problem p(model::Code::RankFileMissing,
            kModelPrefix + join(ranks) + " missing (expected " + std::to_string(dp) + " ranks)", "", ranks);
  // #7546's lost model files: restoring them is their repair (the code's other cases have none).
  p.repair = model::RepairKind::RestoreModelFiles;
  return p;
}

bool is_missing_zero3_model_files_problem(const Problem& p) {
  return p.code == model::code_name(model::Code::RankFileMissing) && p.message.rfind(kModelPrefix, 0) == 0;
}

bool is_missing_dp_rank_problem(const Problem& p) {
  return p.code == model::code_name(model::Code::RankFileMissing) &&
         (p.message.rfind(kOptimPrefix, 0) == 0 || p.message.rfind(kModelPrefix, 0) == 0);
}

}  // namespace ckptdoc::deepspeed
