// Megatron-LM's legacy checkpoints (ckpt_format "torch": iter_NNNNNNN/mp_rank_*/model_optim_rng.pt) as a
// registry source: inspect, diagnose (NaN/Inf, the fp32 mains against their weights) and export of the model
// weights. Every pickle is read with the inert unpickler; nothing in the files is executed.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "ckptdoc/error.h"
#include "ckptdoc/human_bytes.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/plural.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/source.h"
#include "ckptdoc/weights/shards.h"
#include "format/progress_tensors.h"
#include "io/path_relation.h"
#include "legacy_distopt.h"
#include "legacy_folder.h"
#include "legacy_mains.h"
#include "legacy_rank.h"
#include "legacy_repair.h"
#include "legacy_storage_map.h"
#include "legacy_weights.h"
#include "sources/deepspeed/non_finite_watch.h"
#include "sources/deepspeed/output_folder_check.h"

namespace ckptdoc::sources {

namespace {

namespace legacy = megatron_legacy;
using nlohmann::json;

// The folder and every rank file, read once.
struct Opened {
  legacy::LegacyFolder folder;
  std::vector<legacy::RankContent> ranks;      // folder.ranks' order
  const legacy::RankContent* first = nullptr;  // the first readable rank (its args place the folders)
  std::vector<std::unique_ptr<legacy::DistOptState>> distopts;  // each rank's distrib_optim.pt; null: none
  std::vector<const legacy::DistOptState*> distopt_views() const {
    std::vector<const legacy::DistOptState*> out;
    for (const auto& d : distopts) out.push_back(d.get());
    return out;
  }
};

std::shared_ptr<Opened> open_legacy(const std::string& path) {
  auto o = std::make_shared<Opened>();
  o->folder = legacy::resolve(path);
  for (const auto& r : o->folder.ranks) o->ranks.push_back(legacy::read_rank(r.model_file, r.shown));
  for (const auto& r : o->ranks)
    if (r.readable()) {
      o->first = &r;
      break;
    }
  legacy::place_ranks(o->folder, o->first ? o->first->pp_size : 1, o->first ? o->first->ep_size : 1);
  for (size_t i = 0; i < o->ranks.size(); ++i) {
    const auto& rf = o->folder.ranks[i];
    o->distopts.push_back(
        rf.distrib_optim
            ? std::make_unique<legacy::DistOptState>(legacy::read_distopt(
                  (std::filesystem::path(rf.model_file).parent_path() / "distrib_optim.pt").string(),
                  rf.name + "/distrib_optim.pt", o->ranks[i]))
            : nullptr);
  }
  return o;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string header(const Opened& o) {
  const auto& f = o.folder;
  std::string s = "Megatron-LM legacy checkpoint (ckpt_format torch), ";
  s += f.iteration ? "iteration " + std::to_string(*f.iteration) : std::string("release");
  s += f.tracker.empty() ? "" : " (named by " + f.tracker + ")";
  s += "\n  folder " + f.dir + ": " + plural(f.ranks.size(), "rank file");
  if (o.first)
    s += ", tensor parallel " + std::to_string(o.first->tp_size) + ", pipeline " +
         std::to_string(o.first->pp_size) + ", expert " + std::to_string(o.first->ep_size) + " (saved args)";
  return s + "\n";
}

json rank_json(const legacy::RankFolder& f, const legacy::RankContent& r) {
  std::error_code ec;
  json j = {{"file", f.shown},
            {"tp", f.tp},
            {"pp", f.pp},
            {"ep", f.ep},
            {"bytes", std::filesystem::file_size(f.model_file, ec)},
            {"distrib_optim", f.distrib_optim},
            {"other_files", f.others},
            {"readable", r.readable()}};
  if (!r.readable()) {
    j["error"] = r.error;
    return j;
  }
  j["keys"] = r.keys;
  if (r.iteration) j["iteration"] = *r.iteration;
  if (r.checkpoint_version) j["checkpoint_version"] = *r.checkpoint_version;
  j["args"] = {{"type", r.args_type}, {"fields", r.args_fields}};
  json model = json::array();
  for (const auto& t : r.model)
    model.push_back(
        {{"name", t.name}, {"dtype", std::string(dtype_name(t.tensor.dtype))}, {"shape", t.tensor.shape}});
  j["model"] = std::move(model);
  j["model_non_tensors"] = r.model_non_tensors;
  json groups = json::array();
  for (size_t g = 0; g < r.groups.size(); ++g)
    groups.push_back({{"params", r.groups[g].params},
                      {"wd_mult", r.groups[g].wd_mult ? json(*r.groups[g].wd_mult) : json(nullptr)},
                      {"fp32_mains", g < r.mains.size() ? json(r.mains[g].size()) : json(nullptr)}});
  j["optimizer"] = {{"present", r.has_optimizer},
                    {"param_groups", groups},
                    {"state_tensors", r.optimizer_tensors.size()},
                    {"mains_not_read", r.optimizer_layout}};
  return j;
}

std::string rank_text(const legacy::RankFolder& f, const legacy::RankContent& r) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(f.model_file, ec);
  std::string s = f.shown + "  " + (ec ? std::string("missing") : human_bytes(size)) + "  (tp " +
                  std::to_string(f.tp) + ", pp " + std::to_string(f.pp) + ", ep " + std::to_string(f.ep) +
                  ")";
  if (f.distrib_optim) s += "  + distrib_optim.pt";
  s += "\n";
  for (const auto& o : f.others) s += "  also " + o + " (not read)\n";
  if (!r.readable()) return s + "  unreadable: " + r.error + "\n";
  s += "  keys:";
  for (const auto& k : r.keys) s += " " + k;
  s += "\n";
  if (!r.args_type.empty())
    s += "  args: " + r.args_type + " of " + std::to_string(r.args_fields) +
         " fields, read as data (never constructed)\n";
  s += "  model: " + plural(r.model.size(), "tensor") + " (+" + std::to_string(r.model_non_tensors) +
       " other entries, _extra_state)\n";
  for (const auto& t : r.model) {
    char line[256];
    std::snprintf(line, sizeof line, "    %-56s %-9s %s\n", t.name.c_str(),
                  std::string(dtype_name(t.tensor.dtype)).c_str(), shape_text(t.tensor.shape).c_str());
    s += line;
  }
  if (!r.has_optimizer) return s + "  optimizer: none\n";
  s += "  optimizer: " + plural(r.groups.size(), "param group") + " (";
  for (size_t g = 0; g < r.groups.size(); ++g)
    s += (g ? ", " : "") + std::to_string(r.groups[g].params) + " params" +
         (r.groups[g].wd_mult ? " wd_mult " + std::to_string(*r.groups[g].wd_mult).substr(0, 3) : "");
  s += "), " + plural(r.optimizer_tensors.size(), "state tensor");
  if (!r.mains.empty()) {
    s += ", fp32_from_fp16_params [";
    for (size_t g = 0; g < r.mains.size(); ++g) s += (g ? ", " : "") + std::to_string(r.mains[g].size());
    s += "]";
  } else if (!r.optimizer_layout.empty()) {
    s += "; fp32 mains not read: " + r.optimizer_layout;
  }
  return s + "\n";
}

// distrib_optim.pt's tensors and whether its mains were placed (legacy_distopt.h).
json distopt_json(const legacy::DistOptState& d) {
  json j = {{"file", d.shown}, {"readable", d.readable()}};
  if (!d.readable()) {
    j["error"] = d.error;
    return j;
  }
  json tensors = json::array();
  for (const auto& [name, t] : d.tensors)
    tensors.push_back({{"name", name}, {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}});
  j["tensors"] = std::move(tensors);
  j["numel_unpadded"] = d.numel_unpadded;
  j["mains_placed"] = d.slots.size();
  if (d.slots.empty()) j["not_placed"] = d.why;
  return j;
}

std::string distopt_text(const legacy::DistOptState& d) {
  if (!d.readable()) return "  " + d.shown + ": unreadable: " + d.error + "\n";
  std::string s = "  " + d.shown + ": " + plural(d.tensors.size(), "state tensor") + " (";
  for (size_t i = 0; i < d.tensors.size(); ++i)
    s += (i ? ", " : "") + d.tensors[i].first + " " + shape_text(d.tensors[i].second.shape);
  s += "); ";
  s += d.slots.empty() ? "mains not placed: " + d.why
                       : plural(d.slots.size(), "main") + " placed by megatron-core's buffer layout";
  return s + "\n";
}

// NaN/Inf of one tensor, read as float.
struct NonFinite {
  std::string name;
  uint64_t nan = 0, inf = 0;
};

void count_nonfinite(const std::string& name, const Tensor& t, std::vector<NonFinite>& out, uint64_t& read) {
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16 && t.dtype != DType::F64)
    return;
  NonFinite n{name};
  for (float v : t.to_float()) {
    n.nan += std::isnan(v);
    n.inf += std::isinf(v);
  }
  read += static_cast<uint64_t>(t.numel());
  if (n.nan + n.inf > 0) out.push_back(std::move(n));
}

// The param each main and each optimizer state entry belongs to, where map_mains places them
// (legacy_mains.h).
struct OptimizerParamNames {
  std::map<std::pair<size_t, size_t>, std::string> mains;  // (group, index) -> param
  std::map<int64_t, std::string> state;                    // optimizer state key -> param
};

OptimizerParamNames optimizer_param_names(const legacy::RankContent& r) {
  OptimizerParamNames out;
  std::string why;
  std::vector<std::vector<size_t>> members;
  const auto slots = legacy::map_mains(r, why, &members);
  if (!slots) return out;
  for (const auto& s : *slots) out.mains[{s.group, s.index}] = r.model[s.model].name;
  for (size_t g = 0; g < members.size() && g < r.groups.size(); ++g)
    for (size_t j = 0; j < members[g].size() && j < r.groups[g].ids.size(); ++j)
      out.state[r.groups[g].ids[j]] = r.model[members[g][j]].name;
  return out;
}

struct Diagnosis {
  std::vector<model::Finding> problems;
  legacy::LegacyMainComparison mains;
  std::string verdict;
  std::vector<std::string> not_checked;
  bool clean = false;
  size_t tensors_read = 0;
  uint64_t elements_read = 0;
};

Diagnosis diagnose_legacy(const Opened& o) {
  Diagnosis d;
  const auto& f = o.folder;
  size_t rank_files_read = 0;
  for (size_t i = 0; i < o.ranks.size(); ++i) {
    const auto& rf = f.ranks[i];
    const auto& r = o.ranks[i];
    for (const auto& h : r.hazards)
      d.problems.emplace_back(model::Code::UnsafePickle, model::severity_of(h.severity),
                              h.message() + " " + pickle_advice(h.severity), rf.shown);
    if (!r.readable()) {
      std::error_code ec;
      const auto code = !std::filesystem::exists(rf.model_file, ec) ? model::Code::RankFileMissing
                        : r.error_kind == ErrorKind::Truncated      ? model::Code::RankFileTruncated
                                                                    : model::Code::RankFileUnreadable;
      d.problems.emplace_back(code, rf.shown + ": " + r.error, rf.shown);
      d.not_checked.push_back(rf.shown + ": not read, so none of its values were checked");
      continue;
    }
    ++rank_files_read;
    if (const auto* dopt = o.distopts[i].get()) {
      for (const auto& h : dopt->hazards)
        d.problems.emplace_back(model::Code::UnsafePickle, model::severity_of(h.severity),
                                h.message() + " " + pickle_advice(h.severity), dopt->shown);
      if (!dopt->readable()) {
        d.problems.emplace_back(model::Code::OptimizerFileUnreadable, dopt->shown + ": " + dopt->error,
                                dopt->shown);
        d.not_checked.push_back(dopt->shown + ": not read, so none of its values were checked");
      } else {
        std::vector<NonFinite> bad;
        for (const auto& [name, t] : dopt->tensors) count_nonfinite(name, t, bad, d.elements_read);
        d.tensors_read += dopt->tensors.size();
        if (!bad.empty()) {
          std::string msg = dopt->shown + ": " + plural(bad.size(), "state tensor") + " hold NaN or Inf:";
          for (const auto& b : bad)
            msg += " " + b.name + " (" + std::to_string(b.nan) + " NaN, " + std::to_string(b.inf) + " Inf)";
          d.problems.emplace_back(model::Code::NonfiniteValues, msg, dopt->shown);
        }
      }
    }
    if (r.iteration && f.iteration && *r.iteration != *f.iteration)
      d.problems.emplace_back(model::Code::MegatronIterationMismatch,
                              rf.shown + " says iteration " + std::to_string(*r.iteration) +
                                  ", the folder is iteration " + std::to_string(*f.iteration),
                              rf.shown);
    std::vector<NonFinite> bad;
    const auto param_of = optimizer_param_names(r);
    for (const auto& t : r.model) count_nonfinite(t.name, t.tensor, bad, d.elements_read);
    for (size_t g = 0; g < r.mains.size(); ++g)
      for (size_t m = 0; m < r.mains[g].size(); ++m) {
        std::string name =
            "optimizer.fp32_from_fp16_params[" + std::to_string(g) + "][" + std::to_string(m) + "]";
        if (const auto it = param_of.mains.find({g, m}); it != param_of.mains.end())
          name += " (" + it->second + ")";
        count_nonfinite(name, r.mains[g][m], bad, d.elements_read);
      }
    for (const auto& t : r.optimizer_tensors) {
      std::string name = "optimizer.optimizer." + t.name;
      if (const auto it = param_of.state.find(t.key); it != param_of.state.end())
        name += " (" + it->second + ")";
      count_nonfinite(name, t.tensor, bad, d.elements_read);
    }
    d.tensors_read += r.model.size() + r.optimizer_tensors.size();
    for (const auto& g : r.mains) d.tensors_read += g.size();
    if (!bad.empty()) {
      std::string msg = rf.shown + ": " + plural(bad.size(), "tensor") + " hold NaN or Inf:";
      for (size_t k = 0; k < bad.size() && k < 8; ++k)
        msg += " " + bad[k].name + " (" + std::to_string(bad[k].nan) + " NaN, " + std::to_string(bad[k].inf) +
               " Inf)" + (k + 1 < bad.size() && k < 7 ? "," : "");
      if (bad.size() > 8) msg += " and " + std::to_string(bad.size() - 8) + " more";
      d.problems.emplace_back(model::Code::NonfiniteValues, msg, rf.shown);
    }
  }
  if (o.first) {
    const size_t want = static_cast<size_t>(o.first->tp_size) * static_cast<size_t>(o.first->pp_size) *
                        static_cast<size_t>(o.first->ep_size);
    if (f.ranks.size() != want)
      d.problems.emplace_back(model::Code::RankFileMissing,
                              f.dir + " holds " + plural(f.ranks.size(), "mp_rank_* folder") +
                                  "; its args say " + std::to_string(o.first->tp_size) + " tensor x " +
                                  std::to_string(o.first->pp_size) + " pipeline x " +
                                  std::to_string(o.first->ep_size) + " expert ranks (" +
                                  std::to_string(want) + ")");
  }
  d.mains = legacy::compare_mains(f, o.ranks, o.distopt_views());
  for (auto& finding : legacy::legacy_main_findings(d.mains)) {
    if (!finding.files.empty()) finding.file = finding.files.front();
    d.problems.push_back(std::move(finding));
  }
  std::stable_sort(d.problems.begin(), d.problems.end(), [](const auto& a, const auto& b) {
    return static_cast<int>(a.severity) > static_cast<int>(b.severity);
  });
  size_t errors = 0, warnings = 0;
  for (const auto& p : d.problems) {
    errors += p.severity == model::Severity::Error;
    warnings += p.severity == model::Severity::Warning;
  }
  d.verdict = errors     ? plural(errors, "error") + (warnings ? ", " + plural(warnings, "warning") : "")
              : warnings ? plural(warnings, "warning")
                         : std::string("No problems found");
  d.verdict += ". Checked: " + std::to_string(rank_files_read) + " of " +
               plural(f.ranks.size(), "rank file") + " read inertly (never executed); the values of " +
               plural(d.tensors_read, "tensor") + " (model, fp32 mains, optimizer state) for NaN/Inf.";
  if (!d.mains.params.empty())
    d.verdict +=
        " fp32 main params: " + plural(d.mains.mains_compared, "main") + " of " +
        plural(d.mains.params.size(), "param") +
        (d.mains.distrib_optim ? " (distrib_optim.pt's \"param\" state, placed by megatron-core's buffer "
                                 "layout)"
                               : " (optimizer.fp32_from_fp16_params)") +
        " compared with their " + analysis::lp_name(d.mains.lp_dtype) + " weights element by element.";
  for (const auto& n : d.mains.not_compared) d.not_checked.push_back("fp32 main params not compared: " + n);
  if (d.mains.params.empty() && d.mains.not_compared.empty())
    d.not_checked.push_back("no fp32-main-param comparison: no rank file holds fp32 mains");
  d.not_checked.erase(std::unique(d.not_checked.begin(), d.not_checked.end()), d.not_checked.end());
  d.not_checked.push_back("Adam's moments: NaN/Inf only (not against the step); rng_state: not judged");
  d.not_checked.push_back("no checksum of whole files: Megatron-LM's legacy save keeps none");
  d.clean = errors == 0 && rank_files_read == f.ranks.size();
  return d;
}

json diagnosis_json(const Opened& o, const Diagnosis& d) {
  json problems = json::array();
  for (const auto& p : d.problems) {
    problems.push_back({{"code", p.code},
                        {"severity", std::string(model::severity_name(p.severity))},
                        {"message", p.message},
                        {"file", p.file},
                        {"key", p.key}});
    if (!p.params.empty()) problems.back()["params"] = p.params;
  }
  json mains = json::array();
  for (const auto& m : d.mains.records)
    mains.push_back({{"file", o.folder.ranks[m.rank].shown},
                     {"tp", o.folder.ranks[m.rank].tp},
                     {"pp", o.folder.ranks[m.rank].pp},
                     {"group", m.group},
                     {"index", m.index},
                     {"name", m.name},
                     {"exact", m.exact},
                     {"count", m.count}});
  return {{"format", "megatron-legacy"},
          {"path", o.folder.dir},
          {"verdict", {{"clean", d.clean}, {"text", d.verdict}, {"not_checked", d.not_checked}}},
          {"problems", std::move(problems)},
          {"tensors_read", d.tensors_read},
          {"elements_read", d.elements_read},
          {"main_params",
           {{"compared", d.mains.params.size()},
            {"mains", std::move(mains)},
            {"not_compared", d.mains.not_compared}}}};
}

std::string diagnosis_text(const Opened& o, const Diagnosis& d) {
  std::string s = header(o) + "\n" + d.verdict + "\n";
  if (!d.not_checked.empty()) {
    s += "Not checked:\n";
    for (const auto& n : d.not_checked) s += "  - " + n + "\n";
  }
  if (!d.problems.empty()) s += "\n";
  for (const auto& p : d.problems)
    s += std::string(model::severity_name(p.severity)) + "  " + p.code + "\n  " + p.message + "\n";
  return s;
}

void check_output(const Opened& o, const ExportRequest& request) {
  if (request.output.empty())
    throw Error(ErrorKind::InvalidRequest, "", request_text("{output}"), "an output file is required");
  const std::string out = io::normalised_path(request.output);
  for (const std::string& input : {request.path, o.folder.dir}) {
    const std::string in = io::normalised_path(input);
    if (io::inside_or_equal(out, in))
      throw Error(ErrorKind::InvalidRequest, out, request_text("{output}"),
                  "is inside the checkpoint folder " + in +
                      "; choose a path outside it (the input is never modified)");
  }
  if (!request.max_shard_size) deepspeed::detail::check_output_file(out, request.force);
}

class MegatronLegacySource final : public Source {
 public:
  std::string_view name() const override { return "megatron-legacy"; }
  std::string_view description() const override {
    return "a Megatron-LM legacy checkpoint (ckpt_format torch: mp_rank_*/model_optim_rng.pt)";
  }
  bool probe(const std::string& path) const override { return legacy::is_legacy_path(path); }
  bool can(Command command) const override {
    return command == Command::Inspect || command == Command::Diagnose || command == Command::Export ||
           command == Command::Repair || command == Command::Diff;
  }

  Outcome repair(const RepairRequest& request) const override { return legacy::repair(request); }

  Outcome inspect(const InspectRequest& request) const override {
    const auto o = open_legacy(request.path);
    if (request.json) {
      json ranks = json::array();
      for (size_t i = 0; i < o->ranks.size(); ++i) {
        ranks.push_back(rank_json(o->folder.ranks[i], o->ranks[i]));
        if (const auto* d = o->distopts[i].get()) ranks.back()["distrib_optim_pt"] = distopt_json(*d);
      }
      json j = {{"format", "megatron-legacy"},
                {"path", o->folder.dir},
                {"tracker", o->folder.tracker},
                {"ranks", std::move(ranks)}};
      j["iteration"] = o->folder.iteration ? json(*o->folder.iteration) : json(nullptr);
      if (o->first)
        j["parallel"] = {{"tp", o->first->tp_size}, {"pp", o->first->pp_size}, {"ep", o->first->ep_size}};
      return {j.dump(2) + "\n", 0};
    }
    std::string s = header(*o) + "\n";
    for (size_t i = 0; i < o->ranks.size(); ++i) {
      s += rank_text(o->folder.ranks[i], o->ranks[i]);
      if (const auto* d = o->distopts[i].get()) s += distopt_text(*d);
      s += "\n";
    }
    return {s, 0};
  }

  Outcome diagnose(const DiagnoseRequest& request) const override {
    const auto o = open_legacy(request.path);
    const auto d = diagnose_legacy(*o);
    const bool error = std::any_of(d.problems.begin(), d.problems.end(),
                                   [](const auto& p) { return p.severity == model::Severity::Error; });
    if (request.json) return {diagnosis_json(*o, d).dump(2) + "\n", error ? 1 : 0};
    return {diagnosis_text(*o, d), error ? 1 : 0};
  }

  ExportOutcome export_weights(const ExportRequest& request) const override {
    const auto o = open_legacy(request.path);
    check_output(*o, request);
    deepspeed::detail::remove_dead_leftovers(request.output);
    auto w = legacy::select_weights(o->folder, o->ranks);  // refuses before anything is written
    auto tally = std::make_shared<deepspeed::detail::NonFiniteTally>();
    auto tensors = deepspeed::detail::watch_non_finite(w.tensors, tally, request.strict);
    if (request.progress) {  // bytes written, and a cancel between steps of a few MiB (nothing published)
      auto counted = ckptdoc::detail::with_progress(tensors, *request.progress);
      request.progress->set_stage("writing " + std::to_string(tensors.size()) + " weights",
                                  counted.total_bytes);
      tensors = std::move(counted.tensors);
      request.progress->check();
    }
    ExportOutcome out;
    uint64_t bytes = 0;
    std::vector<std::string> files;
    if (request.max_shard_size) {
      const weights::ShardPlan plan =
          weights::plan_shards(tensors, *request.max_shard_size, weights::ShardFormat::Safetensors);
      const weights::ShardedOutput written = weights::write_shards(
          tensors, plan, request.output, weights::ShardFormat::Safetensors, request.force);
      out.path = written.folder;
      bytes = written.bytes;
      files = written.files;
    } else {
      sort_as_safetensors_saves(tensors);
      write_safetensors_file(request.output, tensors, {{"format", "pt"}});
      out.path = request.output;
      std::error_code ec;
      bytes = std::filesystem::file_size(request.output, ec);
    }
    out.tensors = tensors.size();
    for (const auto& t : tally->tensors)
      if (t.nan + t.inf > 0) out.non_finite.push_back(t);
    const size_t tp = o->ranks.size() / w.stages;
    std::string how =
        tp > 1 ? std::to_string(w.merged) + " merged over " + plural(tp, "tensor-parallel rank") + ", " +
                     std::to_string(w.replicated) + " replicated (equal on every rank)"
               : std::string("from ") + (w.stages > 1 ? "the stages' rank files" : o->folder.ranks[0].shown);
    if (w.stages > 1)
      how += "; " + plural(w.stages, "pipeline stage") + " joined, " + std::to_string(w.renumbered) +
             " tensors' layer numbers offset into the global numbering";
    if (request.json) {
      json nf = json::array();
      for (const auto& t : out.non_finite)
        nf.push_back({{"name", t.name}, {"nan", t.nan}, {"inf", t.inf}, {"numel", t.numel}});
      out.text = json{{"path", out.path},   {"tensors", out.tensors},     {"bytes", bytes},
                      {"files", files},     {"merged", w.merged},         {"replicated", w.replicated},
                      {"stages", w.stages}, {"renumbered", w.renumbered}, {"from", o->folder.dir},
                      {"non_finite", nf}}
                     .dump(2) +
                 "\n";
    } else if (!request.quiet) {
      out.text = "wrote " + std::to_string(out.tensors) + " tensors (" + human_bytes(bytes) + ") of " +
                 o->folder.dir + " to " + out.path + " (" + how + ")\n";
      for (const auto& f : files) out.text += "  " + f + "\n";
      out.text += "left out the optimizer state, args and rng_state (not weights)\n";
    }
    return out;
  }

  // The views: each rank file's tensor records under the model's global keys (legacy_storage_map.h).
  std::optional<StorageMap> storage_map(const std::string& path) const override {
    const auto o = open_legacy(path);
    return legacy::legacy_storage_map(o->folder, o->ranks, o->distopt_views());
  }

  std::optional<SourceDiagnosis> diagnosis(const std::string& path) const override {
    const auto o = open_legacy(path);
    const auto d = diagnose_legacy(*o);
    return SourceDiagnosis{d.problems, d.verdict, d.clean, d.not_checked};
  }

  WeightTensors weight_tensors(const std::string& path) const override {
    auto o = open_legacy(path);
    WeightTensors w;
    w.what = "Megatron-LM legacy checkpoint " + o->folder.dir + " (weights)";
    w.tensors = legacy::select_weights(o->folder, o->ranks).tensors;
    w.keep_alive = std::move(o);
    return w;
  }
};

}  // namespace

std::shared_ptr<const Source> make_megatron_legacy_source() {
  return std::make_shared<MegatronLegacySource>();
}

}  // namespace ckptdoc::sources
