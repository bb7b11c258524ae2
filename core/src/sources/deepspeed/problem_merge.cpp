#include "sources/deepspeed/problem_merge.h"

#include <cstdint>
#include <cstring>
#include <set>
#include <tuple>

#include "ckptdoc/compute/distributed.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/rank_owners.h"
#include "sources/deepspeed/deepspeed_rules.h"

namespace ckptdoc::deepspeed::detail {
namespace {

void put_u64(std::string& b, uint64_t v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_str(std::string& b, const std::string& s) {
  put_u64(b, s.size());
  b += s;
}

std::string serialize(const std::vector<Problem>& ps) {
  std::string b;
  put_u64(b, ps.size());
  for (const auto& p : ps) {
    for (const auto* s : {&p.code, &p.message, &p.file}) put_str(b, *s);
    put_u64(b, static_cast<uint64_t>(p.severity));
    put_u64(b, static_cast<uint64_t>(p.repair));
    put_u64(b, p.ranks.size());
    for (int r : p.ranks) put_u64(b, static_cast<uint64_t>(static_cast<int64_t>(r)));
    put_u64(b, p.params.size());
    for (const auto& s : p.params) put_str(b, s);
    put_u64(b, p.details.size());
    for (const auto& [k, v] : p.details) {
      put_str(b, k);
      put_str(b, v);
    }
  }
  return b;
}

struct Reader {
  const std::string& b;
  size_t at = 0;
  uint64_t u64() {
    if (at + 8 > b.size()) throw Error(ErrorKind::Corrupt, "", "problems from another process", "truncated");
    uint64_t v = 0;
    std::memcpy(&v, b.data() + at, 8);
    at += 8;
    return v;
  }
  std::string str() {
    const uint64_t n = u64();
    if (n > b.size() - at) throw Error(ErrorKind::Corrupt, "", "problems from another process", "truncated");
    std::string s = b.substr(at, n);
    at += n;
    return s;
  }
};

std::vector<Problem> deserialize(const std::string& b) {
  Reader r{b};
  std::vector<Problem> ps(r.u64());
  for (auto& p : ps) {
    for (auto* s : {&p.code, &p.message, &p.file}) *s = r.str();
    p.severity = static_cast<model::Severity>(r.u64());
    p.repair = static_cast<model::RepairKind>(r.u64());
    p.ranks.resize(r.u64());
    for (int& x : p.ranks) x = static_cast<int>(static_cast<int64_t>(r.u64()));
    p.params.resize(r.u64());
    for (auto& s : p.params) s = r.str();
    for (uint64_t n = r.u64(), i = 0; i < n; ++i) {
      std::string k = r.str();
      p.details[k] = r.str();
    }
  }
  return ps;
}

}  // namespace

Catalog merged_across_processes(Catalog catalog, const std::vector<Problem>& scan_problems) {
  std::vector<Problem> mine = catalog.problems;
  mine.insert(mine.end(), scan_problems.begin(), scan_problems.end());
  const int dp = catalog.groups.empty() ? catalog.dp_world_size
                                        : static_cast<int>(catalog.groups.front().partitions.size());
  const RankOwners owners = rank_owners(catalog, dp);
  // Everyone's problems to everyone, one process's blob at a time (they are few and small).
  std::vector<Problem> all;
  const std::string blob = serialize(mine);
  for (int p = 0; p < mpi_size(); ++p) {
    uint64_t n = p == mpi_rank() ? blob.size() : 0;
    mpi_broadcast(&n, sizeof n, p);
    std::string buf = p == mpi_rank() ? blob : std::string(n, '\0');
    mpi_broadcast(buf.data(), buf.size(), p);
    for (auto& q : deserialize(buf)) all.push_back(std::move(q));
  }
  std::vector<int> optim_missing, model_missing;
  for (int r = 0; r < static_cast<int>(owners.owner.size()); ++r) {
    if (owners.optim_nowhere[static_cast<size_t>(r)]) optim_missing.push_back(r);
    if (owners.model_nowhere[static_cast<size_t>(r)]) model_missing.push_back(r);
  }
  std::vector<Problem> out;
  std::set<std::tuple<std::string, model::Severity, std::string, std::string, std::vector<int>,
                      std::vector<std::string>>>
      seen;
  bool optim_done = false, model_done = false;
  for (auto& p : all) {
    if (is_missing_dp_rank_problem(p)) {
      // Rebuilt where the first process placed it, from the ranks no process has.
      const bool optim = p.message.rfind("optimizer", 0) == 0;
      bool& done = optim ? optim_done : model_done;
      const auto& ranks = optim ? optim_missing : model_missing;
      if (done || ranks.empty()) continue;
      done = true;
      p = optim ? missing_optim_files_problem(ranks, dp) : missing_zero3_model_files_problem(ranks, dp);
    }
    // One process's view of #7546 (rank 0's model file alone) is wrong when another process has the others.
    if (p.code == model::code_name(model::Code::Zero3ModelFilesNotSaved) && model_missing.empty()) continue;
    if (seen.insert({p.code, p.severity, p.message, p.file, p.ranks, p.params}).second)
      out.push_back(std::move(p));
  }
  catalog.problems = std::move(out);
  // Optimizer files beyond the world size (a problem of their own) stay counted as the catalog counted them.
  int extra = 0;
  for (const auto& f : catalog.files)
    if (f.role == FileRole::Optim && f.mp_rank == 0 && f.dp_rank >= dp) ++extra;
  catalog.optim_file_count = extra + static_cast<int>(owners.owner.size() - optim_missing.size());
  catalog.source_rules = rules_of(catalog);  // they read the optimizer file count
  return catalog;
}

}  // namespace ckptdoc::deepspeed::detail
