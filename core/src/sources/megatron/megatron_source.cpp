// Megatron-core distributed checkpoints as a registry source: the iteration folder (or the save folder whose
// latest_checkpointed_iteration.txt names it) is read by sources/dcp/, with what Megatron adds beside the DCP
// files: metadata.json's backend and common.pt, read with the inert unpickler.
#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "bucket_checks.h"
#include "bucket_nonfinite.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/number_text.h"
#include "ckptdoc/plural.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/dcp/diagnose.h"
#include "ckptdoc/sources/dcp/export.h"  // is_optimizer_key
#include "ckptdoc/sources/dcp/report_text.h"
#include "ckptdoc/sources/source.h"
#include "drop_optimizer.h"
#include "integrity.h"
#include "main_params.h"
#include "megatron_folder.h"
#include "refresh_mains.h"
#include "reset_optimizer.h"
#include "sources/dcp/source_export.h"
#include "sources/dcp/storage_map.h"

namespace ckptdoc::sources {

namespace {

// Said by every repair of a save that had megatron-core 0.18+'s integrity.json (repaired_copy.h).
constexpr const char* kIntegrityNote =
    "integrity.json was left out of the copy: it lists the sha256 of files this repair rewrote";

std::string header(const megatron::IterationFolder& f) {
  std::string s = "Megatron-core distributed checkpoint, ";
  s += f.iteration ? "iteration " + std::to_string(*f.iteration) : std::string("release");
  s += f.tracker.empty() ? "" : " (named by " + f.tracker + ")";
  s += "\n  metadata.json " + f.metadata_json + "\n";
  return s;
}

nlohmann::json megatron_json(const megatron::IterationFolder& f, const megatron::CommonState& c) {
  nlohmann::json common = {{"present", c.present}, {"where", c.where}, {"keys", c.keys}};
  if (!c.error.empty()) common["error"] = c.error;
  if (c.iteration) common["iteration"] = *c.iteration;
  if (c.checkpoint_version) common["checkpoint_version"] = *c.checkpoint_version;
  if (!c.args_type.empty()) common["args"] = {{"type", c.args_type}, {"fields", c.args_fields}};
  nlohmann::json j = {{"iteration_dir", f.dir},
                      {"tracker", f.tracker},
                      {"sharded_backend", f.backend},
                      {"metadata_json", nlohmann::json::parse(f.metadata_json, nullptr, false)},
                      {"common", common}};
  j["iteration"] = f.iteration ? nlohmann::json(*f.iteration) : nlohmann::json(nullptr);
  return j;
}

// The verdict's sentence on integrity.json: how many files were verified, or that none were.
std::string integrity_sentence(const megatron::IntegrityCheck& i, bool asked) {
  if (!i.present)
    return asked ? " No integrity.json (megatron-core 0.18+ writes it with verify_integrity): no sha256 list "
                   "to verify against."
                 : "";
  if (!i.readable) return " integrity.json could not be read as a sha256 list: nothing verified against it.";
  if (i.verified)
    return " integrity.json: " + std::to_string(i.matched) + " of " + plural(i.listed, "listed file") +
           " verified, sha256 equal.";
  return " integrity.json present (" + plural(i.listed, "file") +
         " listed), their sha256 NOT verified (diagnose --verify-checksums does).";
}

// What Megatron's own files add to the DCP diagnosis: common.pt (absent, unreadable, unsafe) and its
// iteration against the folder's, integrity.json's list against the files. The verdict is rewritten when
// that adds an error or a warning, and says what it read.
void add_megatron_findings(dcp::Report& r, const dcp::Checkpoint& ckpt, const megatron::IterationFolder& f,
                           const megatron::CommonState& c, const megatron::MainParamComparison& mains,
                           const megatron::IntegrityCheck& integrity, bool verify_asked) {
  std::vector<dcp::Problem> added = integrity.problems;
  for (auto& finding : megatron::main_param_findings(mains)) {
    // master_findings reports errors and warnings only (fp32-master-mismatch, fp32-master-drift); a DCP
    // report names the param's key.
    finding.key = finding.params.empty() ? "" : mains.prefix + finding.params.front();
    if (const auto it =
            finding.params.empty() ? mains.key_of.end() : mains.key_of.find(finding.params.front());
        it != mains.key_of.end())
      finding.key = it->second;  // bucket space: the bucket holding the first param's main
    if (!finding.files.empty()) finding.file = finding.files.front();
    added.push_back(std::move(finding));
  }
  if (!c.present)
    added.push_back(
        dcp::problem(model::Code::MegatronCommonMissing,
                     "common.pt is absent and the DCP holds no common_state item: megatron-core's "
                     "load reads the state that is not sharded (args, iteration) from one of them",
                     "common.pt"));
  else if (!c.error.empty())
    added.push_back(
        dcp::problem(model::Code::MegatronCommonUnreadable, c.where + ": " + c.error, c.file, c.key));
  for (const auto& h : c.hazards)
    added.push_back(dcp::problem(model::Code::UnsafePickle,
                                 model::severity_of(h.severity),  // the hazard's own

                                 h.message() + " " + pickle_advice(h.severity), "common.pt"));
  if (c.iteration && f.iteration && *c.iteration != *f.iteration)
    added.push_back(dcp::problem(model::Code::MegatronIterationMismatch,
                                 c.where + " says iteration " + std::to_string(*c.iteration) +
                                     ", the folder is iteration " + std::to_string(*f.iteration),
                                 c.file, c.key));
  const size_t errors_before = std::count_if(r.problems.begin(), r.problems.end(), [](const auto& p) {
    return p.severity == model::Severity::Error;
  });
  const size_t warnings_before = r.problems.size() - errors_before;
  // Bucket space: the NaN/Inf of the bucket tensors judged by param, or not at all without the map
  const auto bucket_nonfinite = megatron::judge_bucket_nonfinite(r, ckpt, mains);
  for (const auto& n : bucket_nonfinite.not_checked) r.not_checked.push_back(n);
  // Checks 5 and 6 of docs/megatron-bucket-layout.md
  std::string bucket_sentence;
  if (mains.bucket_space) {
    auto sizes = megatron::check_bucket_sizes(ckpt);
    added.insert(added.end(), sizes.problems.begin(), sizes.problems.end());
    for (const auto& n : sizes.not_checked) r.not_checked.push_back(n);
    if (sizes.groups > 0)
      bucket_sentence += " Bucket sizes: per_bucket_numel[_unpadded] of " + plural(sizes.groups, "dp group") +
                         " checked against the tensors (param, exp_avg, exp_avg_sq) of their " +
                         plural(sizes.judged, "bucket") + ".";
    if (mains.map) {
      auto moments = megatron::check_second_moments(ckpt, *mains.map, r.tensors);
      added.insert(added.end(), moments.problems.begin(), moments.problems.end());
      for (const auto& n : moments.not_checked) r.not_checked.push_back(n);
      if (moments.judged > 0)
        bucket_sentence += " Adam's exp_avg_sq: the slices of " + plural(moments.judged, "placed param") +
                           " checked >= 0 (the 64-alignment gaps left out).";
    }
  }
  r.problems.insert(r.problems.end(), added.begin(), added.end());
  std::stable_sort(r.problems.begin(), r.problems.end(), [](const auto& a, const auto& b) {
    return (a.severity == model::Severity::Error) > (b.severity == model::Severity::Error);
  });
  size_t errors = 0;
  for (const auto& p : r.problems) errors += p.severity == model::Severity::Error;
  const size_t warnings = r.problems.size() - errors;
  if (errors != errors_before || warnings != warnings_before) {
    // the DCP sentence's basis stays true; its opening count is replaced by the new one
    const auto at = r.verdict.find("Checked: ");
    const std::string basis = at == std::string::npos ? r.verdict : r.verdict.substr(at);
    r.verdict = (errors     ? plural(errors, "error") + (warnings ? ", " + plural(warnings, "warning") : "")
                 : warnings ? plural(warnings, "warning")
                            : std::string("No problems found")) +
                ". " + basis;
    const bool complete =
        !r.tensors.empty() && std::all_of(r.tensors.begin(), r.tensors.end(),
                                          [](const auto& t) { return t.elements_read == t.numel; });
    r.clean = errors == 0 && complete;
  }
  if (!bucket_nonfinite.unjudged_keys.empty()) {
    r.clean = false;  // NaN/Inf were found that nothing judged
    bucket_sentence += " Bucket tensors: " + plural(bucket_nonfinite.unjudged, "NaN/Inf element") +
                       " not judged (no param -> slice map; see not checked).";
  }
  r.verdict += " Megatron: metadata.json sharded_backend " + f.backend + "; " + c.summary() + ".";
  r.verdict += integrity_sentence(integrity, verify_asked);
  if (!mains.params.empty() && mains.bucket_space)
    r.verdict += " fp32 main params: " + std::to_string(mains.params.size()) + " of " +
                 plural(mains.bucket_params, "param") + " placed in the bucket-space state (" + mains.prefix +
                 "*.param slices) compared with their " + analysis::lp_name(mains.lp_dtype) +
                 " weights element by element.";
  else if (!mains.params.empty())
    r.verdict += " fp32 main params: " + plural(mains.params.size(), "param") + " (" + mains.prefix +
                 "<key>) compared with their " + analysis::lp_name(mains.lp_dtype) +
                 " weights element by element.";
  r.verdict += bucket_sentence;
  bool optimizer = false;
  for (const auto& t : r.tensors) optimizer = optimizer || dcp::is_optimizer_key(t.key);
  std::vector<std::string> not_checked;
  for (auto& n : r.not_checked) {
    // DCP keeps no whole-file checksums, but integrity.json does: said below when not verified
    if (integrity.readable && n.rfind("no checksum of whole files", 0) == 0) continue;
    if (n.rfind("no fp32-master comparison", 0) != 0) {
      not_checked.push_back(n);
      continue;
    }
    if (!mains.params.empty()) continue;  // made above
    not_checked.push_back(mains.bucket_space
                              ? "no fp32-main-param comparison: the optimizer state is in bucket space "
                                "(optimizer.distributed.*, dp_reshardable) and no main was compared (why: "
                                "below)"
                          : optimizer ? "no fp32-main-param comparison: no optimizer.state.fp32_param.<key> "
                                        "or optimizer.state.param.<key> "
                                        "beside a bf16 or fp16 weight"
                                      : "no fp32-main-param comparison: this checkpoint holds no optimizer "
                                        "state (no optimizer.* keys)");
  }
  for (const auto& n : mains.not_compared) not_checked.push_back("fp32 main param not compared: " + n);
  if (integrity.readable && !integrity.verified)
    not_checked.push_back("integrity.json's sha256 of " + plural(integrity.listed, "file") +
                          " not verified (diagnose --verify-checksums)");
  r.not_checked = std::move(not_checked);
}

class MegatronSource final : public Source {
 public:
  std::string_view name() const override { return "megatron"; }
  std::string_view description() const override {
    return "a Megatron-core distributed checkpoint (torch_dist)";
  }
  bool probe(const std::string& path) const override { return megatron::is_megatron_path(path); }
  bool exports_torch() const override { return true; }
  bool can(Command command) const override {
    return command == Command::Inspect || command == Command::Diagnose || command == Command::Export ||
           command == Command::Repair || command == Command::Diff;
  }

  Outcome inspect(const InspectRequest& request) const override {
    const auto f = megatron::resolve(request.path);
    const auto ckpt = dcp::Checkpoint::open(f.dir);
    const auto common = megatron::read_common(f.dir, *ckpt);
    if (request.json) {
      auto j = nlohmann::json::parse(dcp::metadata_json(*ckpt));
      j["format"] =
          "megatron-core";  // a DCP folder with Megatron's files beside: the DCP fields, and "megatron"
      j["megatron"] = megatron_json(f, common);
      return {j.dump(2) + "\n", 0};
    }
    std::string out = header(f) + "  " + common.summary() + "\n";
    for (const auto& h : common.hazards) out += "  " + h.severity + " unsafe-pickle " + h.message() + "\n";
    return {out + "\n" + dcp::inspect_text(*ckpt), 0};
  }

  // The DCP diagnosis with Megatron's findings: what diagnose prints and the views show.
  struct Diagnosed {
    megatron::IterationFolder folder;
    std::shared_ptr<dcp::Checkpoint> ckpt;
    megatron::CommonState common;
    dcp::Report report;
    megatron::MainParamComparison mains;
    megatron::IntegrityCheck integrity;
  };
  static Diagnosed diagnosed(const sources::DiagnoseRequest& request) {
    Diagnosed d;
    d.folder = megatron::resolve(request.path);
    d.ckpt = dcp::Checkpoint::open(d.folder.dir);
    d.common = megatron::read_common(d.folder.dir, *d.ckpt);
    d.report = dcp::diagnose(*d.ckpt);
    d.mains = megatron::compare_main_params(*d.ckpt);
    d.integrity = megatron::check_integrity(d.folder.dir, request.verify_checksums, request.progress);
    add_megatron_findings(d.report, *d.ckpt, d.folder, d.common, d.mains, d.integrity,
                          request.verify_checksums);
    return d;
  }

  std::optional<StorageMap> storage_map(const std::string& path) const override {
    const auto f = megatron::resolve(path);
    const auto ckpt = dcp::Checkpoint::open(f.dir);
    StorageMap map;
    map.format = "megatron-core";
    map.path = ckpt->dir();
    dcp::add_to_storage_map(*ckpt, "", map);
    return map;
  }

  std::optional<SourceDiagnosis> diagnosis(const std::string& path) const override {
    return diagnosis_for({.path = path});
  }
  std::optional<SourceDiagnosis> diagnosis_for(const DiagnoseRequest& request) const override {
    const auto d = diagnosed(request);
    return dcp::diagnosis_of(d.report.problems, d.report.verdict, d.report.clean, d.report.not_checked);
  }

  Outcome diagnose(const DiagnoseRequest& request) const override {
    const auto [f, ckpt, common, report, mains, integrity] = diagnosed(request);
    if (request.json) {
      auto j = nlohmann::json::parse(dcp::report_json(*ckpt, report));
      j["format"] = "megatron-core";
      j["megatron"] = megatron_json(f, common);
      j["megatron"]["main_params"] = {
          {"compared", mains.params.size()}, {"prefix", mains.prefix}, {"not_compared", mains.not_compared}};
      if (mains.bucket_space) {
        auto& m = j["megatron"]["main_params"];
        m["placed"] = mains.bucket_params;
        m["slices"] =
            nlohmann::json::object();  // bucket space: each param's main, "<bucket key> [start, end)"
        for (const auto& [name, slice] : mains.slice_of) m["slices"][name] = slice;
      }
      j["megatron"]["integrity"] = {{"present", integrity.present},
                                    {"readable", integrity.readable},
                                    {"verified", integrity.verified},
                                    {"listed", integrity.listed},
                                    {"matched", integrity.matched}};
      return {j.dump(2) + "\n", report.has_error() ? 1 : 0};
    }
    return {header(f) + "\n" + dcp::diagnose_text(*ckpt, report), report.has_error() ? 1 : 0};
  }

  // --refresh-fp32: the fp32 main params := upcast(bf16/fp16 weights), in a new folder (refresh_mains.h).
  // --reset-optimizer: the Adam moments zeroed and the common state's step 0 (common.pt, or 0.19's
  // common_state item), in a new folder (reset_optimizer.h).
  // --drop-optimizer: the save without its optimizer, as --no-save-optim writes it (drop_optimizer.h).
  Outcome repair(const RepairRequest& request) const override {
    const int actions =
        int{request.reset_optimizer} + int{request.refresh_fp32} + int{request.drop_optimizer};
    if (actions != 1 || !request.other_actions.empty()) {
      std::string asked;
      for (const auto& [on, name] : {std::pair{request.refresh_fp32, "{refresh_fp32}"},
                                     std::pair{request.reset_optimizer, "{reset_optimizer}"},
                                     std::pair{request.drop_optimizer, "{drop_optimizer}"}})
        if (on && actions > 1) asked += (asked.empty() ? "" : ", ") + request_text(name);
      for (const auto& a : request.other_actions) asked += (asked.empty() ? "" : ", ") + a;
      throw Error(ErrorKind::Unsupported, request.path, asked.empty() ? "repair" : asked,
                  request_text("a Megatron-core checkpoint is repaired with {refresh_fp32} alone (the fp32 "
                               "main params from the weights), {reset_optimizer} alone (the Adam moments "
                               "zeroed and the step 0) or {drop_optimizer} alone (the optimizer left out)"));
    }
    if (request.reset_optimizer) return reset(request);
    if (request.drop_optimizer) return drop(request);
    const auto r = megatron::refresh_main_params(request.path, request.output, request.progress);
    std::vector<std::string> notes;
    if (!r.absent_moments.empty())
      notes.push_back("the save holds no optimizer.state.exp_avg / exp_avg_sq for " +
                      plural(r.absent_moments.size(), "param") +
                      " (saved before a first step): megatron-core's load of the optimizer asks for them, so "
                      "leave them out "
                      "of its request (Adam starts them at zero) or load the model alone");
    if (r.integrity_dropped) notes.push_back(kIntegrityNote);
    if (request.json) {
      const nlohmann::json j = {{"output", r.output},
                                {"iteration_dir", r.iteration_dir},
                                {"params", r.params},
                                {"chunks_rewritten", r.chunks},
                                {"prefix", r.prefix},
                                {"absent_moments", r.absent_moments},
                                {"integrity_dropped", r.integrity_dropped},
                                {"bucket_space", r.bucket_space},
                                {"gap_elements_kept", r.gap_elements},
                                {"verified", true},
                                {"notes", notes}};
      return {j.dump(2) + "\n", 0};
    }
    if (r.bucket_space) {  // refresh_bucket_mains.h
      std::string text =
          "Refreshed the fp32 main params of " + plural(r.params, "param") +
          " (their slices of the DistributedOptimizer's " + r.prefix +
          "*.param buckets) from their weights: " + plural(r.chunks, "storage record") +
          " rewritten in a copy, every other byte the input's; the " + std::to_string(r.gap_elements) +
          " elements of the 64-alignment gaps between params are left as stored (no param's).\nWrote " +
          r.output +
          "\nVerified: every param's slice in the copy is the exact upcast of its weight. The Adam moments "
          "and the step are the input's.\n";
      for (const auto& n : notes) text += "Note: " + n + ".\n";
      return {text, 0};
    }
    std::string text = "Refreshed the fp32 main params of " + plural(r.params, "param") + " (" + r.prefix +
                       "<key>) from their weights: " + plural(r.chunks, "storage item") +
                       " rewritten in a copy, " + "every other byte the input's.\nWrote " + r.output +
                       "\nVerified: every main in the copy is the exact upcast of its weight.\n";
    for (const auto& n : notes) text += "Note: " + n + ".\n";
    return {text, 0};
  }

  static Outcome drop(const RepairRequest& request) {
    const auto r = megatron::drop_optimizer(request.path, request.output, request.progress);
    std::vector<std::string> notes;
    if (r.integrity_dropped) notes.push_back(kIntegrityNote);
    if (request.json) {
      const nlohmann::json j = {{"output", r.output},
                                {"iteration_dir", r.iteration_dir},
                                {"action", "drop-optimizer"},
                                {"keys_dropped", r.dcp.keys},
                                {"items_dropped", r.dcp.items},
                                {"keys_kept", r.dcp.kept_keys},
                                {"storage_bytes_before", r.dcp.bytes_before},
                                {"storage_bytes_after", r.dcp.bytes_after},
                                {"common_dropped", r.common_dropped},
                                {"common_where", r.common_where},
                                {"integrity_dropped", r.integrity_dropped},
                                {"verified", true},
                                {"notes", notes}};
      return {j.dump(2) + "\n", 0};
    }
    std::string common = r.common_where + " as it was";
    if (!r.common_dropped.empty()) {
      common = r.common_where + " without";
      for (size_t i = 0; i < r.common_dropped.size(); ++i)
        common += std::string(i ? "," : "") + " " + r.common_dropped[i];
    }
    std::string text =
        "Dropped the optimizer: " + plural(r.dcp.keys, "optimizer.* key") + " (" +
        plural(r.dcp.items, "storage item") + ") left out of a new .metadata and new storage files, " +
        common + "; " + plural(r.dcp.kept_keys, "key") + " kept, their items' bytes the input's (storage " +
        std::to_string(r.dcp.bytes_before) + " -> " + std::to_string(r.dcp.bytes_after) + " bytes).\nWrote " +
        r.output +
        "\nVerified: the copy holds the input's keys but the optimizer's, each kept item byte for byte" +
        (r.common_where == "common.pt" || r.common_dropped.empty() ? std::string(", and common.pt's")
                                                                   : " but " + r.common_where + ", and its") +
        " other entries. Load it as Megatron-LM's --finetune / --no-load-optim does (the model "
        "alone, a fresh optimizer).\n";
    for (const auto& n : notes) text += "Note: " + n + ".\n";
    return {text, 0};
  }

  static Outcome reset(const RepairRequest& request) {
    const auto r = megatron::reset_optimizer(request.path, request.output, request.progress);
    std::vector<std::string> notes;
    if (r.integrity_dropped) notes.push_back(kIntegrityNote);
    std::string said;
    for (const auto& n : notes) said += "Note: " + n + ".\n";
    if (request.json) {
      nlohmann::json j = {{"output", r.output},
                          {"iteration_dir", r.iteration_dir},
                          {"action", "reset-optimizer"},
                          {"params", r.params},
                          {"tensors", r.tensors},
                          {"records", r.records},
                          {"step_where", r.step_where},
                          {"step_before", r.step_before},
                          {"steps_reset", r.steps},
                          {"integrity_dropped", r.integrity_dropped},
                          {"verified", true},
                          {"notes", notes}};
      if (!r.common_where.empty()) j["common_where"] = r.common_where;  // the step's file (not bucket space)
      return {j.dump(2) + "\n", 0};
    }
    if (r.step_where.find("optimizer.distributed.") !=
        std::string::npos)  // bucket space (reset_bucket_optimizer.h)
      return {
          "Reset the DistributedOptimizer's bucket-space Adam state: " + plural(r.params, "bucket") + " (" +
              plural(r.tensors, "moment tensor") + ", " + plural(r.records, "storage record") +
              " zeroed in a copy) and the step of " + plural(r.steps, "param group") + " (" + r.step_where +
              ") from " + step_text(r.step_before) + " to 0, every other byte the input's.\nWrote " +
              r.output +
              "\nVerified: every moment in the copy reads as zero and each param-groups object as the "
              "input's with the step 0. The fp32 main params (the buckets' param), weights and the common "
              "state (args) are the input's.\n" +
              said,
          0};
    return {"Reset the Adam state of " + plural(r.params, "param") + " (" +
                plural(r.tensors, "moment tensor") + ", " + plural(r.records, "storage record") +
                " zeroed in a copy) and the step " + r.step_where + " in " + r.common_where + " from " +
                step_text(r.step_before) + " to 0, every other byte the input's.\nWrote " + r.output +
                "\nVerified: every moment in the copy reads as zero and " + r.common_where +
                " reads as the input's with the step 0; megatron-core's Adam resumes from it as a fresh "
                "optimizer (its first step is step 1). "
                "The fp32 main params, weights, param groups (lr ...) and args are the input's.\n" +
                said,
            0};
  }

  ExportOutcome export_weights(const ExportRequest& request) const override {
    const auto f = megatron::resolve(request.path);
    DcpExportContext context;
    context.from = f.dir;
    context.left_out = "optimizer tensors";
    context.note = "(the bytes items are _extra_state, rng_state, ...; common.pt is not exported)";
    context.fields["iteration_dir"] = f.dir;
    return export_dcp_weights(*dcp::Checkpoint::open(f.dir), request, context);
  }

  WeightTensors weight_tensors(const std::string& path) const override {
    const auto f = megatron::resolve(path);
    return dcp_weight_tensors(dcp::Checkpoint::open(f.dir), "Megatron-core checkpoint " + f.dir);
  }

  // The model-space layouts' optimizer.state.<moment>.<key>; a bucket-space save (dp_reshardable) has none.
  WeightTensors moment_tensors(const std::string& path, const std::string& moment) const override {
    const auto f = megatron::resolve(path);
    return dcp_moment_tensors(dcp::Checkpoint::open(f.dir), "Megatron-core checkpoint " + f.dir, moment);
  }
};

}  // namespace

std::shared_ptr<const Source> make_megatron_source() {
  return std::make_shared<MegatronSource>();
}

}  // namespace ckptdoc::sources
