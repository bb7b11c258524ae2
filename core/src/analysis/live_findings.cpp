// The rules on a live engine's numbers (analysis::LiveReport, filled by a source that reads a snapshot):
// non-finite gradients, a gradient norm far from the clip value, a loss scale at its floor, a step that
// overflowed.
#include <cmath>
#include <cstdio>

#include "ckptdoc/analysis/live.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/short_list.h"

namespace ckptdoc::analysis {

namespace {

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

std::vector<analysis::Finding> live_findings(const analysis::LiveReport& live,
                                             const LiveThresholds& thresholds) {
  using analysis::Finding;
  using analysis::Severity;
  std::vector<Finding> out;
  const bool fp16_dynamic = live.loss_scale.has_value() && live.min_loss_scale.has_value();

  if (live.grads_requested && !live.grads_present) {
    out.emplace_back(model::Code::GradientsNotRecorded,
                     "The snapshot was asked for gradients but the engine held none: they exist only between "
                     "engine.backward() and engine.step() (ZeRO frees them in the step). Call dump(..., "
                     "grads=True) there.");
  }
  if (live.grad_nonfinite > 0) {
    std::vector<std::string> params;
    for (const auto& [name, n] : live.grad_nonfinite_by_param) params.push_back(name);
    const std::string list = short_list(params);
    Finding f(model::Code::GradientNonfinite);
    if (fp16_dynamic) f.severity = Severity::Warning;  // fp16's loss scaler skips the step: nothing written
    f.message =
        std::to_string(live.grad_nonfinite) + " of " + std::to_string(live.grad_numel) +
        " recorded gradient elements are NaN or Inf (" + list + "). " +
        (fp16_dynamic ? "With fp16's dynamic loss scale DeepSpeed skips this step and halves the scale; "
                        "watch for it repeating (the loss scale collapsing)."
                      : "Nothing rescales them away without fp16 loss scaling: this step writes NaN/Inf into "
                        "the optimizer state. Look at the loss and the batch that produced it.");
    f.params = std::move(params);
    f.evidence = {{"nonfinite", static_cast<double>(live.grad_nonfinite)},
                  {"numel", static_cast<double>(live.grad_numel)}};
    out.push_back(std::move(f));
  }
  // The recorded gradients' norm when there are some (this step's), else DeepSpeed's last one.
  const std::optional<double> norm = live.recorded_grad_norm ? live.recorded_grad_norm : live.grad_norm;
  const double clip = live.gradient_clipping.value_or(0);
  if (norm && !std::isfinite(*norm) && live.grad_nonfinite == 0) {
    // A warning under fp16's dynamic loss scale: the step was skipped, nothing was written.
    Finding f{
        model::Code::GradientNormNonfinite, fp16_dynamic ? Severity::Warning : Severity::Error,
        "DeepSpeed's last global gradient norm is " + number(*norm) +
            ": the last step saw NaN/Inf gradients" +
            (fp16_dynamic ? " (an fp16 overflow, skipped)." : "; the optimizer state may hold NaN/Inf now.")};
    out.push_back(std::move(f));
  } else if (norm && std::isfinite(*norm) && clip > 0 && *norm >= thresholds.clip_ratio * clip) {
    Finding f = analysis::finding_of(model::Code::GradientNormFarAboveClip);
    f.message = "The gradient norm " + number(*norm) + " is " + number(*norm / clip) +
                " times the clip value " + number(clip) +
                ": every update is scaled down by that much, so the learning rate in effect is " +
                number(clip / *norm) +
                " of the configured one. Usually a sign of a loss spike, a too-high learning "
                "rate or an unscaled loss.";
    f.evidence = {{"grad_norm", *norm}, {"gradient_clipping", clip}, {"ratio", *norm / clip}};
    out.push_back(std::move(f));
  } else if (norm && *norm == 0 && live.global_steps > 0 &&
             (live.recorded_grad_norm || !live.overflow.value_or(false))) {
    Finding f{
        model::Code::GradientNormZero,
        "The gradient norm is exactly 0 after " + std::to_string(live.global_steps) +
            " steps: no trainable param receives a gradient (a detached loss, frozen params, or a zero loss "
            "scale)."};
    f.evidence = {{"grad_norm", 0.0}};
    out.push_back(std::move(f));
  }
  if (fp16_dynamic && *live.loss_scale <= *live.min_loss_scale && live.global_steps > 0) {
    Finding f{
        model::Code::LossScaleAtFloor,
        "The fp16 dynamic loss scale is at its floor (" + number(*live.loss_scale) +
            ", min_loss_scale): overflows keep happening and the scale cannot go lower; gradients that still "
            "overflow make every step a skipped one."};
    f.evidence = {{"loss_scale", *live.loss_scale}, {"min_loss_scale", *live.min_loss_scale}};
    out.push_back(std::move(f));
  }
  if (live.overflow.value_or(false)) {
    Finding f{model::Code::LastStepOverflow,
              "The last optimizer step overflowed in fp16 and was skipped (skipped steps so far: " +
                  std::to_string(live.skipped_steps) + ")."};
    f.evidence = {{"skipped_steps", static_cast<double>(live.skipped_steps)}};
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace ckptdoc::analysis
