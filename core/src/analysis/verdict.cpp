#include "ckptdoc/analysis/verdict.h"

#include <algorithm>

#include "analysis/rules.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/weights/weights_source.h"

namespace ckptdoc::analysis {
namespace {

std::string count_of(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

Verdict verdict_of(const Report& report, const model::Catalog& catalog) {
  Verdict v;
  uint64_t compared_elements = 0;
  for (const auto& p : report.params) {
    if (p.lp_vs_fp32 && p.lp_vs_fp32->count > 0)
      ++v.masters_compared, compared_elements += p.lp_vs_fp32->count;
    if (p.exp_avg || p.exp_avg_sq) ++v.moments_checked;
    if (p.lp || p.fp32) ++v.tensors_scanned;
  }
  size_t errors = 0, warnings = 0;
  for (const auto& f : report.findings) {
    errors += f.severity == Severity::Error;
    warnings += f.severity == Severity::Warning;
  }

  const bool weights_only = catalog.weights_only;
  // DeepSpeed 0.18.3+ may keep the masters in bf16 (or fp16): the verdict names what it compared.
  const bool masters_16bit =
      std::any_of(report.findings.begin(), report.findings.end(),
                  [](const Finding& f) { return f.code == model::code_name(model::Code::MastersIn16Bit); });
  const std::string masters = masters_16bit ? "16-bit masters" : "fp32 masters";
  // Training files without optimizer groups: what was read is the model file's module weights.
  const bool module_only = catalog.module_weights_file && catalog.groups.empty();
  if (module_only) {
    v.basis = v.tensors_scanned == 0 ? "no tensor was read"
                                     : "the " + lp_name(catalog.lp_dtype) + " weights of " +
                                           count_of(v.tensors_scanned, "module tensor", "module tensors") +
                                           " were read (NaN/Inf, all-zero tensors)";
    v.not_checked.push_back(
        !catalog.has_optimizer
            ? "this checkpoint holds no optimizer state: no master and no moment to compare the weights with"
            : "the optimizer's masters and moments were not matched to the params (see the warnings): none "
              "was "
              "compared with the weights");
  } else if (weights_only) {
    v.basis = v.tensors_scanned == 0 ? "no tensor was read"
                                     : "the values of " + count_of(v.tensors_scanned, "tensor", "tensors") +
                                           " were read (NaN/Inf, all-zero tensors)";
    // A Trainer's or Accelerate's save keeps its optimizer beside the weights: say it was not read, never
    // that there is none.
    auto state =
        catalog.single_file ? std::vector<std::string>{} : weights::training_state_files(catalog.save_dir);
    // The optimizer files read beside the weights (optimizer.bin) are part of the basis, not of what was not
    // read.
    for (const auto& o : report.optimizer_files) {
      if (!o.read) continue;
      std::erase(state, o.file);
      v.basis += "; the optimizer state in " + o.file + " was read (" +
                 count_of(o.params_with_state, "param", "params") +
                 (o.step ? ", step " + std::to_string(static_cast<int64_t>(*o.step)) : std::string()) + ")";
      if (o.weights_compared > 0 && o.by_name)
        v.basis += " and its moments were matched to the weights by name (" +
                   std::to_string(o.names_matched) + " of " + std::to_string(o.params_with_state) + ")";
      else if (o.weights_compared > 0)
        v.basis +=
            " and its moments' shapes were matched to the weights by shape only (" +
            std::to_string(o.shapes_matched) + " of " + std::to_string(o.params_with_state) +
            "): its param indices number the params group after group in the order the optimizer was given "
            "them, an order the weights file does not keep";
    }
    const bool optimizer_read = std::any_of(report.optimizer_files.begin(), report.optimizer_files.end(),
                                            [](const auto& o) { return o.read; });
    if (state.empty() && !optimizer_read) {
      v.not_checked.push_back(
          "a weights " + std::string(catalog.single_file ? "file" : "folder") +
          " holds no fp32 masters and no optimizer state: nothing to compare the weights with");
    } else if (!state.empty()) {
      std::string names;
      for (const auto& f : state) names += (names.empty() ? "" : ", ") + f;
      v.not_checked.push_back(
          optimizer_read
              ? "the rest of the training state saved beside the weights (" + names +
                    ") was not read: its values were not checked, and the weights were compared with no fp32 "
                    "master"
              : "the training state saved beside the weights (" + names +
                    ") was not read: its optimizer state was not checked, and the weights were compared "
                    "with no fp32 master");
    }
  } else {
    if (v.masters_compared > 0)
      v.basis = "the " + masters + " of " + count_of(v.masters_compared, "param", "params") + " (" +
                std::to_string(compared_elements) + " elements) were compared with their " +
                lp_name(catalog.lp_dtype) + " weights";
    else if (v.tensors_scanned > 0)
      v.basis = "the " + std::string(masters_16bit ? "master" : "fp32") + " values of " +
                count_of(v.tensors_scanned, "param", "params") +
                " were read (NaN/Inf), but no master was compared with a 16-bit weight";
    else
      v.basis = "no param's values were read";
    if (v.moments_checked > 0)
      v.basis += "; the Adam moments of " + count_of(v.moments_checked, "param", "params") + " were checked";
    else if (catalog.has_optimizer)
      v.not_checked.push_back("no optimizer moments were found to check");
    if (v.masters_compared == 0 && v.tensors_scanned > 0) {
      if (catalog.lp_weights_elsewhere && !catalog.compares_lp_source)  // --lp-source is refused
        v.not_checked.push_back(
            "ZeRO-3: the fp32 partitions are the only copy of the weights in this checkpoint (its model "
            "files hold none), so nothing was compared with them");
      else if (catalog.lp_weights_elsewhere)
        v.not_checked.push_back(
            "ZeRO-3: the fp32 partitions are the only copy of the weights in this checkpoint (its model "
            "files hold "
            "none), so nothing was compared with them; pass 16-bit weights saved elsewhere (--lp-source) to "
            "compare");
      else
        v.not_checked.push_back("no 16-bit weight was found to compare the " + masters + " with");
    }
  }

  for (const auto& f : report.findings)
    if (!f.not_checked.empty()) v.not_checked.push_back(f.not_checked);

  if (errors + warnings > 0) {
    v.kind = VerdictKind::Problems;
    std::string h;
    if (errors) h = count_of(errors, "error", "errors");
    if (warnings) h += (h.empty() ? "" : ", ") + count_of(warnings, "warning", "warnings");
    v.headline = h + ".";
  } else if ((weights_only && v.tensors_scanned > 0) || v.masters_compared > 0) {
    v.kind = VerdictKind::Clean;
    v.headline = "No problems found.";
  } else if (module_only && v.tensors_scanned > 0) {
    v.headline = "No NaN/Inf or damage found in the weights, but there are no masters to compare them with.";
  } else {
    v.kind = VerdictKind::NothingCompared;
    v.headline = v.tensors_scanned > 0
                     ? "No NaN/Inf or damage found, but the " + masters + " were compared with nothing."
                     : "Nothing was checked.";
  }
  return v;
}

}  // namespace ckptdoc::analysis
