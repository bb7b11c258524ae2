#include "sources/deepspeed/lp_source_compare.h"

#include <algorithm>
#include <vector>

#include "analysis/rules.h"
#include "ckptdoc/compute/backend.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/short_list.h"
#include "sources/deepspeed/param_readers.h"

namespace ckptdoc::deepspeed::detail {

using analysis::Finding;
using analysis::finding_of;
using analysis::MismatchThresholds;
using analysis::ParamReport;
using analysis::RepairKind;
using analysis::Report;

namespace {

constexpr int64_t kChunk = 1 << 22;  // elements of one param read and compared at a time

// A weight agrees with its master when it is the master rounded (bit for bit) almost everywhere: the share
// the fp32-master rules call healthy.
bool agrees(const DivergenceStats& d) {
  return d.nonfinite == 0 && d.exact_fraction() >= MismatchThresholds{}.healthy_exact_fraction;
}

}  // namespace

void compare_with_lp_source(const deepspeed::Checkpoint& ckpt, const std::string& lp_path, bool beside,
                            Report& report) {
  using namespace deepspeed::detail;
  const SourceLayout layout = source_layout(ckpt);
  const StateReader state(ckpt, layout);
  if (!state.has_field("fp32")) return;
  const auto backend = make_backend(DeviceKind::Cpu);
  LpReader lp(*backend);
  const auto keep = add_file_lp(lp_path, lp);

  std::vector<std::string> missing, wrong_size, disagree;
  std::vector<float> fp32, lp32;
  size_t compared = 0;
  for (const auto& name : layout.order) {
    const ParamPlace& place = layout.params.at(name);
    const Tensor* t = lp.find(name);
    if (!t) {
      missing.push_back(name);
      continue;
    }
    if (t->numel() != place.numel) {
      wrong_size.push_back(name + " (" + std::to_string(t->numel()) + " elements there, " +
                           std::to_string(place.numel) + " here)");
      continue;
    }
    DivergenceStats d;
    for (int64_t first = 0; first < place.numel; first += kChunk) {
      const int64_t n = std::min(kChunk, place.numel - first);
      fp32.resize(static_cast<size_t>(n));
      lp32.resize(static_cast<size_t>(n));
      state.read("fp32", name, first, n, fp32.data());
      lp.read(name, first, n, lp32.data());
      if (t->dtype == DType::F16 || t->dtype == DType::BF16) {
        // The exact-rounding test needs the weight in its own dtype: back from the exact upcast.
        std::vector<uint16_t> half(static_cast<size_t>(n));
        backend->downcast(lp32.data(), t->dtype, half.data(), static_cast<size_t>(n));
        d.merge(backend->divergence(half.data(), t->dtype, fp32.data(), static_cast<size_t>(n)));
      } else {
        d.merge(backend->divergence(lp32.data(), DType::F32, fp32.data(), static_cast<size_t>(n)));
      }
    }
    ++compared;
    if (!agrees(d)) disagree.push_back(name);
    auto it = std::find_if(report.params.begin(), report.params.end(),
                           [&](const ParamReport& p) { return p.name == name; });
    if (it != report.params.end()) {
      it->lp_vs_fp32 = d;
      it->lp_dtype = t->dtype;
    }
  }

  const std::string where = lp_path + (beside ? " (found beside the checkpoint)" : "");
  if (!disagree.empty()) {
    Finding f = finding_of(model::Code::LpSourceMismatch);
    f.message = "the 16-bit weights in " + where +
                " do not match this ZeRO-3 checkpoint's fp32 partitions for " +
                std::to_string(disagree.size()) + " of " + std::to_string(compared) + " params (" +
                short_list(disagree) +
                "). Either that save is stale (another step) or of another model, or the fp32 partitions are "
                "stale (left at their initial values, the DeepSpeed #762 state). DeepSpeed restores the fp32 "
                "partitions; if the 16-bit weights are the ones to trust, repair --refresh-fp32 --lp-source "
                "rebuilds the masters from them";
    f.params = disagree;
    f.evidence["params_compared"] = static_cast<double>(compared);
    f.evidence["params_disagreeing"] = static_cast<double>(disagree.size());
    f.repair = RepairKind::RefreshFp32;
    f.files = {lp_path};
    report.findings.push_back(std::move(f));
  }
  if (!missing.empty() || !wrong_size.empty()) {
    Finding f = finding_of(model::Code::LpSourceIncomplete);
    f.message =
        where + " does not hold every param of the checkpoint: " +
        (missing.empty() ? "" : std::to_string(missing.size()) + " missing (" + short_list(missing) + ")") +
        (!missing.empty() && !wrong_size.empty() ? "; " : "") +
        (wrong_size.empty()
             ? ""
             : std::to_string(wrong_size.size()) + " of another size (" + short_list(wrong_size) + ")") +
        "; those were not compared";
    f.params = missing;
    f.files = {lp_path};
    report.findings.push_back(std::move(f));
  }
  Finding info = finding_of(model::Code::LpSourceCompared);
  info.message = "ZeRO-3 keeps no 16-bit weights in its files: the fp32 partitions of " +
                 std::to_string(compared) + " params were compared with the 16-bit weights in " + where;
  info.files = {lp_path};
  report.findings.push_back(std::move(info));
}

}  // namespace ckptdoc::deepspeed::detail
