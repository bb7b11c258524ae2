// fp16 masters with float32 Adam moments (fp16_master_weights_and_grads, DeepSpeedCPUAdam's default
// fp32_optimizer_states): the files are whole, but a resume casts the moments to the masters' dtype (torch's
// Optimizer.load_state_dict converts floating-point state to its param's dtype, and DeepSpeed hands the
// optimizer the fp16 masters). Every exp_avg_sq below float16's reach becomes 0, and the first step after the
// resume divides those elements' exp_avg by eps alone. Measured with DeepSpeed 0.19.8 on its own undamaged
// files: weights moved by up to 140 in that step (tests/realds, v019_z2_fp16_dp2_fp16_masters).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ckptdoc/model/finding_codes.h"
#include "rules.h"

namespace ckptdoc::analysis {

namespace {

// Values of |x| below 2^-25 round to 0 in float16 (its smallest subnormal is 2^-24; 2^-25 ties to even, 0).
// LogHistogram bin i starts at 2^(kLogMinExp + i/4), so bins below 2^-25 are those before this one.
constexpr int kFirstBinNotFlushed = (-25 - LogHistogram::kLogMinExp) * 4;

uint64_t flushed_to_zero(const ValueStats& s) {
  uint64_t n = s.log_abs.underflow;
  int i = 0;
  for (uint64_t c : s.log_abs.counts) {
    if (i++ >= kFirstBinNotFlushed) break;
    n += c;
  }
  return n;
}

}  // namespace

void moments_cast_rules(const model::Catalog& cat, const std::vector<ParamReport>& params,
                        std::vector<Finding>& out) {
  const auto note = std::find_if(out.begin(), out.end(), [](const Finding& f) {
    return f.code == model::code_name(model::Code::MastersIn16Bit);
  });
  if (note == out.end()) return;
  const auto dtype = note->details.find("dtype");
  if (dtype == note->details.end() || dtype->second != "float16") return;
  uint64_t flushed = 0, total = 0;
  std::vector<std::string> names;
  for (const auto& p : params) {
    if (!p.exp_avg_sq) continue;
    const uint64_t n = flushed_to_zero(*p.exp_avg_sq);
    total += p.exp_avg_sq->finite_count() - p.exp_avg_sq->zeros;
    if (n == 0) continue;
    flushed += n;
    names.push_back(p.name);
  }
  if (flushed == 0) return;  // moments saved in float16, or none that small: a resume keeps them
  char share[32];
  std::snprintf(share, sizeof share, "%.3g%%",
                total ? 100.0 * static_cast<double>(flushed) / static_cast<double>(total) : 0.0);
  // Who hands the optimizer the fp16 masters, what a measured resume did, and the load without the state:
  // the source's words (DeepSpeed's: its params, 0.19.8's measurement, load_optimizer_states=False).
  const auto words = cat.source_rules ? cat.source_rules->optimizer_state_words()
                                      : model::SourceRules::OptimizerStateWords{};
  Finding f = finding_of(model::Code::MomentsFlushedOnResume);
  f.message =
      "The master weights are float16 and their Adam moments are saved in float32, but a resume casts the "
      "moments to float16 (torch's Optimizer.load_state_dict converts state to its param's dtype, and " +
      words.cast_params + " are the fp16 masters): " + std::to_string(flushed) +
      " non-zero exp_avg_sq values (" + share + ") in " + std::to_string(names.size()) +
      " params are below float16's smallest value and become 0, so the first step after the resume divides "
      "their exp_avg by eps alone" +
      words.cast_measured +
      ". The files are intact: resume with float32 or bf16 master weights, or without the optimizer state (" +
      (words.load_without_state.empty() ? "" : words.load_without_state + ", ") + "which loses the moments)";
  f.params = std::move(names);
  f.evidence = {{"exp_avg_sq_flushed", static_cast<double>(flushed)},
                {"exp_avg_sq_nonzero", static_cast<double>(total)}};
  out.push_back(std::move(f));
}

}  // namespace ckptdoc::analysis
