// The DCP diagnosis of every part of a save_state folder, gathered into one verdict.
#include "sources/accelerate/diagnose.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "ckptdoc/error.h"
#include "ckptdoc/format/pickle_safety.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/plural.h"

namespace ckptdoc::accelerate {
namespace {

// Accelerate's optimizer state dict names params by the model's fqn, without the model part's "model.".
void check_optimizer_params(Report& r) {
  for (const auto& opt : r.parts) {
    if (opt.part.role != "optimizer" || !opt.ckpt) continue;
    const auto model = std::find_if(r.parts.begin(), r.parts.end(), [&](const PartReport& p) {
      return p.part.role == "model" && p.part.index == opt.part.index && p.ckpt;
    });
    if (model == r.parts.end()) continue;
    std::set<std::string> params;
    for (const auto& e : opt.ckpt->metadata().entries)
      for (const char* field : {"exp_avg", "exp_avg_sq", "step"})
        if (auto p = dcp::optimizer_state_param(e.key, field); !p.empty()) params.insert(p);
    for (const auto& p : params) {
      if (model->ckpt->metadata().find("model." + p) || model->ckpt->metadata().find(p)) {
        ++r.optimizer_params_matched;
        continue;
      }
      std::string message = opt.part.folder + "/: optimizer state for '";
      message += p;
      message += "', which " + model->part.folder + "/ does not hold (as 'model.";
      message += p;
      message += "'): the optimizer was saved for another model";
      r.problems.push_back(dcp::problem(model::Code::AccelerateOptimizerParamUnknown, std::move(message),
                                        opt.part.folder + "/.metadata", p));
    }
  }
}

// Accelerate writes scheduler.bin for each scheduler it prepared, and one wraps an optimizer whose state
// save_state writes as optimizer_<i>/: the scheduler without it means the optimizer state was lost.
void check_optimizer_present(Report& r) {
  const bool has_optimizer = std::any_of(r.parts.begin(), r.parts.end(),
                                         [](const PartReport& p) { return p.part.role == "optimizer"; });
  const bool has_scheduler = std::any_of(r.layout.other_files.begin(), r.layout.other_files.end(),
                                         [](const std::string& f) { return f.rfind("scheduler", 0) == 0; });
  if (!has_optimizer && has_scheduler)
    r.problems.push_back(
        dcp::problem(model::Code::AccelerateOptimizerMissing,
                     "no optimizer_<i>/ folder beside scheduler.bin: Accelerate saves the state of the "
                     "optimizer a scheduler steps as optimizer_<i>/, so it was lost or not copied "
                     "(resuming would restart Adam's moments from zero)",
                     "optimizer_0/"));
}

// scheduler.bin and random_states_<r>.pkl are torch.save pickles Accelerate's load_state loads: their values
// are not read, but what loading them would run is judged (inert unpickler, never executed).
void check_pickles(Report& r) {
  for (const auto& f : r.layout.other_files) {
    const std::string path = (std::filesystem::path(r.layout.dir) / f).string();
    try {
      const auto m = MappedFile::open(path);
      if (!TorchFile::is_torch_file(m->bytes().first(std::min<size_t>(m->size(), 16)))) continue;
    } catch (const std::exception&) {
      continue;  // unreadable: listed as not read like the rest
    }
    ++r.pickles_checked;
    for (const auto& h : pickle_hazards_of_file(path, f))
      r.problems.push_back(dcp::problem(model::Code::UnsafePickle,
                                        model::severity_of(h.severity),  // the hazard's own

                                        h.message() + " " + pickle_advice(h.severity), f));
  }
}

void write_verdict(Report& r) {
  size_t errors = 0, warnings = 0;
  for (const auto& p : r.problems) {
    errors += p.severity == model::Severity::Error;
    warnings += p.severity == model::Severity::Warning;
  }
  bool parts_clean = !r.parts.empty();
  std::string basis;
  for (const auto& p : r.parts) {
    parts_clean = parts_clean && p.ckpt && p.report.clean;
    basis += (basis.empty() ? "" : " ") + p.part.folder + "/ (" + p.part.role +
             "): " + (p.ckpt ? p.report.verdict : std::string("not opened."));
  }
  const bool has_optimizer = std::any_of(r.parts.begin(), r.parts.end(),
                                         [](const PartReport& p) { return p.part.role == "optimizer"; });
  if (has_optimizer)
    basis +=
        " Optimizer params found among the model's keys: " + std::to_string(r.optimizer_params_matched) + ".";
  if (r.pickles_checked)
    basis += " What loading " + plural(r.pickles_checked, "pickle file") +
             " beside the parts would run was judged by the inert unpickler.";
  r.clean = errors == 0 && parts_clean;
  if (errors)
    r.verdict = plural(errors, "error") + (warnings ? ", " + plural(warnings, "warning") : "") + ". " + basis;
  else
    r.verdict = (warnings ? plural(warnings, "warning") + ". " : std::string("No problems found. ")) + basis;
  if (!has_optimizer)
    r.not_checked.push_back("no optimizer_<i>/ folder: no optimizer state to judge (Adam steps, moments)");
  for (const auto& f : r.layout.other_files)
    r.not_checked.push_back("not read: " + f +
                            (f.rfind("random_states_", 0) == 0 ? " (a rank's RNG states, a torch.save pickle)"
                             : f == "scheduler.bin" ? " (the LR scheduler's state, a torch.save pickle)"
                                                    : "") +
                            ": its values are not judged");
  for (const auto& p : r.parts)
    for (const auto& n : p.report.not_checked)
      if (p.part.role == "optimizer" ||
          n.find("Adam") == std::string::npos)  // a model part holds no Adam state
        r.not_checked.push_back(p.part.folder + "/: " + n);
}

}  // namespace

bool Report::has_error() const {
  return std::any_of(problems.begin(), problems.end(),
                     [](const dcp::Problem& p) { return p.severity == model::Severity::Error; });
}

Report diagnose(const std::string& dir) {
  Report r;
  r.layout = read_save_state(dir);
  for (const auto& part : r.layout.parts) {
    PartReport pr{part, nullptr, {}};
    const std::string folder = (std::filesystem::path(dir) / part.folder).string();
    try {
      pr.ckpt = dcp::Checkpoint::open(folder);
      pr.report = dcp::diagnose(*pr.ckpt);
      for (auto p : pr.report.problems) {
        p.message = part.folder + "/: " + p.message;
        p.file = p.file.empty() ? part.folder + "/" : part.folder + "/" + p.file;
        r.problems.push_back(std::move(p));
      }
    } catch (const Error& e) {  // no readable .metadata: the part cannot be located at all
      r.problems.push_back(
          dcp::problem(model::Code::AcceleratePartUnreadable, part.folder + "/: " + e.what(),
                       std::filesystem::relative(e.file().empty() ? folder : e.file(), dir).string()));
    }
    r.parts.push_back(std::move(pr));
  }
  check_optimizer_params(r);
  check_optimizer_present(r);
  check_pickles(r);
  std::stable_sort(r.problems.begin(), r.problems.end(),
                   [](const dcp::Problem& a, const dcp::Problem& b) { return a.severity > b.severity; });
  write_verdict(r);
  return r;
}

std::string report_text(const Report& r) {
  std::string out = "Accelerate FSDP save_state folder " + r.layout.dir + "\n";
  for (const auto& p : r.parts) {
    out += "  " + p.part.folder + "/  " + p.part.role + " " + std::to_string(p.part.index);
    if (p.ckpt)
      out += ": " + plural(p.ckpt->metadata().entries.size(), "key") + " in " +
             plural(p.ckpt->storage_files().size(), "file");
    out += "\n";
  }
  out += "\n" +
         std::string(r.clean && r.problems.empty() ? "CLEAN: "
                     : r.has_error()               ? "ERRORS: "
                                                   : "WARNINGS: ") +
         r.verdict + "\n";
  for (const auto& p : r.problems)
    out += "  [" + std::string(model::severity_name(p.severity)) + "] " + p.code + ": " + p.message + "\n";
  if (!r.not_checked.empty()) out += "Not checked:\n";
  for (const auto& n : r.not_checked) out += "  - " + n + "\n";
  return out;
}

std::string report_json(const Report& r) {
  using nlohmann::json;
  json problems = json::array();
  for (const auto& p : r.problems)
    problems.push_back({{"code", p.code},
                        {"severity", std::string(model::severity_name(p.severity))},
                        {"message", p.message},
                        {"file", p.file},
                        {"key", p.key}});
  json parts = json::array();
  for (const auto& p : r.parts)
    parts.push_back({{"folder", p.part.folder},
                     {"role", p.part.role},
                     {"index", p.part.index},
                     {"report", p.ckpt ? json::parse(dcp::report_json(*p.ckpt, p.report)) : json(nullptr)}});
  const json j{{"format", "accelerate-fsdp"},
               {"path", r.layout.dir},
               {"verdict", {{"clean", r.clean}, {"text", r.verdict}, {"not_checked", r.not_checked}}},
               {"problems", std::move(problems)},
               {"parts", std::move(parts)},
               {"optimizer_params_matched", r.optimizer_params_matched},
               {"pickles_checked", r.pickles_checked},
               {"not_read", r.layout.other_files}};
  return j.dump(1);
}

}  // namespace ckptdoc::accelerate
