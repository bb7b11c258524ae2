// The fp32 mains of a legacy Megatron save refreshed from their weights, in a copy (legacy_refresh.h).
#include "legacy_refresh.h"

#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/request_field.h"
#include "io/copy_tree.h"
#include "legacy_distopt.h"
#include "legacy_folder.h"
#include "legacy_mains.h"
#include "legacy_rank.h"
#include "sources/dcp/rewrite_records.h"

namespace ckptdoc::megatron_legacy {
namespace fs = std::filesystem;
namespace {

std::vector<uint8_t> upcast(const Tensor& weight) {
  const auto f = weight.to_float();
  std::vector<uint8_t> out(f.size() * sizeof(float));
  std::memcpy(out.data(), f.data(), out.size());
  return out;
}

// Every storage the file's tensors use more than once (a main sharing bytes with another tensor would change
// it).
std::set<const Storage*> shared_storages(const RankContent& r) {
  std::set<const Storage*> seen, shared;
  const auto note = [&](const Tensor& t) {
    if (!seen.insert(t.storage.get()).second) shared.insert(t.storage.get());
  };
  for (const auto& t : r.model) note(t.tensor);
  for (const auto& g : r.mains)
    for (const auto& t : g) note(t);
  for (const auto& t : r.optimizer_tensors) note(t.tensor);
  return shared;
}

// One storage record to write in the copy, and how many mains it holds.
struct Rewrite {
  dcp::StorageRecord record;
  std::vector<uint8_t> data;
  size_t mains = 0;
};

// distrib_optim.pt's coalesced "param" state with each placed main := its weight upcast; the 64-alignment
// gaps keep their stored bytes (legacy_distopt.h).
Rewrite distopt_rewrite(const LegacyFolder& folder, const RankFolder& rf, const RankContent& rank,
                        std::set<std::string>& names) {
  const std::string path = (fs::path(rf.model_file).parent_path() / "distrib_optim.pt").string();
  const DistOptState d = read_distopt(path, rf.name + "/distrib_optim.pt", rank);
  if (!d.readable())
    throw Error(d.error_kind == ErrorKind::Other ? ErrorKind::Corrupt : d.error_kind, path,
                request_text("{refresh_fp32}"),
                "cannot be read, so its mains cannot be refreshed: " + d.error);
  if (d.slots.empty())
    throw Error(
        ErrorKind::Unsupported, path, request_text("{refresh_fp32}"),
        "its fp32 mains cannot be placed on the params (" + d.why + "): nothing is refreshed on a guess");
  const Tensor& p = d.param;
  size_t users = 0;
  for (const auto& [name, t] : d.tensors) users += t.storage == p.storage;
  if (!p.is_contiguous() || p.storage_offset != 0 || !p.storage ||
      p.storage->numel != static_cast<uint64_t>(p.numel()) || users != 1 ||
      d.file->format != TorchFormat::Zip)
    throw Error(ErrorKind::Unsupported, path, "param",
                "not a whole float32 storage of its own: not rewritten");
  Rewrite w{dcp::file_record(folder.dir, rf.name + "/distrib_optim.pt",
                             d.file->archive_name + "/data/" + p.storage->key),
            p.to_bytes(), d.slots.size()};
  for (const auto& slot : d.slots) {
    const auto main = upcast(rank.model[slot.model].tensor);
    std::memcpy(w.data.data() + static_cast<size_t>(slot.start) * sizeof(float), main.data(), main.size());
    names.insert(rank.model[slot.model].name);
  }
  if (w.record.entry.size != w.data.size())
    throw Error(ErrorKind::Inconsistent, path, "param", "its record is not the state's size");
  return w;
}

}  // namespace

LegacyRefresh refresh_mains(const std::string& path, const std::string& output, Progress* progress) {
  const LegacyFolder folder = resolve(path);
  std::vector<std::string> inputs{path, folder.dir};
  if (!folder.save_dir.empty()) inputs.push_back(folder.save_dir);
  const std::string out = dcp::checked_new_output(output, inputs);
  // What to rewrite, all checked before anything is written.
  std::vector<Rewrite> rewrites;
  std::set<std::string> names;
  LegacyRefresh r;
  for (const auto& rf : folder.ranks) {
    const RankContent rank = read_rank(rf.model_file, rf.shown);
    if (!rank.readable())
      throw Error(rank.error_kind == ErrorKind::Other ? ErrorKind::Corrupt : rank.error_kind, rf.model_file,
                  request_text("{refresh_fp32}"),
                  "cannot be read, so its mains cannot be refreshed: " + rank.error);
    if (rank.mains.empty() && rf.distrib_optim) {
      rewrites.push_back(distopt_rewrite(folder, rf, rank, names));
      ++r.rank_files;
      r.distrib_optim = true;
      continue;
    }
    if (rank.mains.empty())
      throw Error(ErrorKind::Unsupported, rf.model_file, request_text("{refresh_fp32}"),
                  rank.has_optimizer ? "holds no fp32 mains to refresh: " + rank.optimizer_layout
                                     : "holds no optimizer state: no fp32 mains to refresh");
    if (rank.file->format != TorchFormat::Zip)
      throw Error(ErrorKind::Unsupported, rf.model_file, request_text("{refresh_fp32}"),
                  "is a legacy (non-zip) torch.save file: its records are not rewritten");
    std::string why;
    const auto slots = map_mains(rank, why);
    if (!slots)
      throw Error(
          ErrorKind::Unsupported, rf.model_file, request_text("{refresh_fp32}"),
          "its fp32 mains cannot be placed on the params (" + why + "): nothing is refreshed on a guess");
    const auto shared = shared_storages(rank);
    const std::string dir = fs::path(rf.model_file).parent_path().parent_path().string();
    for (const auto& s : *slots) {
      const Tensor& main = rank.mains[s.group][s.index];
      const auto& weight = rank.model[s.model];
      const std::string label = "fp32_from_fp16_params[" + std::to_string(s.group) + "][" +
                                std::to_string(s.index) + "] (" + weight.name + ")";
      if (main.dtype != DType::F32 || !main.is_contiguous() || main.storage_offset != 0 || !main.storage ||
          main.storage->numel != static_cast<uint64_t>(main.numel()) || shared.count(main.storage.get()))
        throw Error(ErrorKind::Unsupported, rf.model_file, label,
                    "not a whole float32 storage of its own: not rewritten");
      Rewrite w{dcp::file_record(dir, rf.name + "/model_optim_rng.pt",
                                 rank.file->archive_name + "/data/" + main.storage->key),
                upcast(weight.tensor), 1};
      if (w.record.entry.size != w.data.size())
        throw Error(ErrorKind::Inconsistent, rf.model_file, label, "its record is not the main's size");
      rewrites.push_back(std::move(w));
      names.insert(weight.name);
    }
    ++r.rank_files;
  }
  r.output = out;
  for (const auto& w : rewrites) r.mains += w.mains;
  r.params = names.size();
  dcp::write_new_folder(out, [&](const std::string& partial) {
    std::string iter = partial;
    if (!folder.save_dir.empty()) {
      fs::copy_file(folder.tracker, fs::path(partial) / fs::path(folder.tracker).filename());
      iter = (fs::path(partial) / fs::path(folder.dir).filename()).string();
    }
    io::copy_tree(folder.dir, iter, progress);
    Progress none;
    Progress& p = progress ? *progress : none;
    p.set_stage("rewriting " + std::to_string(rewrites.size()) + " storage records", rewrites.size());
    for (const auto& w : rewrites) {
      p.check();
      dcp::write_record(w.record, w.data, iter);
      p.add(1);
    }
    // The copy is checked before it is published: every main now rounds exactly to its weight and is its
    // upcast.
    p.set_stage("checking the copy", 0);
    const LegacyFolder copied = resolve(iter);
    std::vector<RankContent> ranks;
    for (const auto& rf : copied.ranks) ranks.push_back(read_rank(rf.model_file, rf.shown));
    std::vector<std::unique_ptr<DistOptState>> distopts;
    std::vector<const DistOptState*> views;
    for (size_t i = 0; i < copied.ranks.size(); ++i) {
      const auto& rf = copied.ranks[i];
      distopts.push_back(rf.distrib_optim
                             ? std::make_unique<DistOptState>(read_distopt(
                                   (fs::path(rf.model_file).parent_path() / "distrib_optim.pt").string(),
                                   rf.name + "/distrib_optim.pt", ranks[i]))
                             : nullptr);
      views.push_back(distopts.back().get());
    }
    const auto check = compare_mains(copied, ranks, views);
    if (check.mains_compared != r.mains || !check.not_compared.empty())
      throw Error(ErrorKind::Inconsistent, iter, request_text("{refresh_fp32}"),
                  "the copy's mains could not all be compared");
    for (const auto& c : check.params)
      if (c.lp_vs_fp32->exact != c.lp_vs_fp32->count || c.lp_vs_fp32->max_abs != 0)
        throw Error(ErrorKind::Inconsistent, iter, c.name, "the refreshed main is not its weight upcast");
  });
  return r;
}

}  // namespace ckptdoc::megatron_legacy
