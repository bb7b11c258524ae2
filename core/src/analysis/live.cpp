// Live-engine numbers and findings of a snapshot: the manifest's scalars, a pass over the recorded gradients
// (L2 norm and NaN/Inf, attributed to params through the partition layout), and the rules on them.
#include "ckptdoc/analysis/live.h"

#include <cmath>
#include <cstring>

#include "ckptdoc/deepspeed/checkpoint.h"
#include "ckptdoc/deepspeed/snapshot.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/short_list.h"

namespace ckptdoc::analysis {

using snapshot::GradTensor;
using snapshot::LiveScalars;
using snapshot::Manifest;
using snapshot::Snapshot;

namespace {

float element(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return half_to_float(h);
    }
    case DType::BF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return bf16_to_float(b);
    }
    case DType::F64: {
      double d;
      std::memcpy(&d, p, 8);
      return static_cast<float>(d);
    }
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

struct GradScan {
  double sum_sq = 0;  // of unscaled values
  uint64_t numel = 0, nonfinite = 0;
  std::vector<int64_t> nonfinite_at;  // element indices, first few thousand
};

GradScan scan(const GradTensor& g) {
  GradScan s;
  const Tensor& t = g.tensor;
  if (!is_floating(t.dtype)) return s;
  const auto bytes = t.storage->bytes();
  const size_t es = element_size(t.dtype);
  const int64_t n = t.numel();
  const double inv = g.scale != 0 ? 1.0 / g.scale : 1.0;
  const uint8_t* base = bytes.data() + static_cast<size_t>(t.storage_offset) * es;
  for (int64_t i = 0; i < n; ++i) {
    const float v = element(t.dtype, base + static_cast<size_t>(i) * es);
    if (!std::isfinite(v)) {
      ++s.nonfinite;
      if (s.nonfinite_at.size() < 4096) s.nonfinite_at.push_back(i);
      continue;
    }
    const double u = static_cast<double>(v) * inv;
    s.sum_sq += u * u;
  }
  s.numel = static_cast<uint64_t>(n);
  return s;
}

// Which param holds element `at` of rank `rank`'s partition of group `group`.
const model::ParamEntry* param_at(const model::Catalog& c, int group, int rank, int64_t at) {
  if (group < 0 || static_cast<size_t>(group) >= c.groups.size()) return nullptr;
  const auto& g = c.groups[static_cast<size_t>(group)];
  for (const auto& part : g.partitions) {
    if (part.rank != rank) continue;
    for (const auto& f : part.fragments)
      if (at >= f.partition_offset && at < f.partition_offset + f.numel)
        return &g.params[static_cast<size_t>(f.param)];
  }
  return nullptr;
}

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

analysis::LiveReport live_report(const deepspeed::Checkpoint& ckpt) {
  analysis::LiveReport r;
  const Snapshot* snap = ckpt.snapshot();
  if (!snap) return r;
  const Manifest& m = snap->manifest();
  const LiveScalars& l = m.live;
  r.snapshot_id = m.id;
  r.created_unix = m.created_unix;
  r.global_steps = l.global_steps;
  r.global_samples = l.global_samples;
  r.skipped_steps = l.skipped_steps;
  r.grad_norm = l.grad_norm;
  r.gradient_clipping = l.gradient_clipping;
  r.loss_scale = l.loss_scale;
  r.min_loss_scale = l.min_loss_scale;
  r.overflow = l.overflow;
  r.lr = l.lr;
  r.grads_requested = l.grads_requested;
  double sum_sq = 0;
  bool any_partition = false;
  for (const auto& rank : m.ranks) {
    for (int g : snap->partition_grad_groups(rank.rank)) {
      const auto grad = snap->partition_grad(rank.rank, g);
      if (!grad) continue;
      any_partition = true;
      const GradScan s = scan(*grad);
      sum_sq += s.sum_sq;
      r.grad_numel += s.numel;
      r.grad_nonfinite += s.nonfinite;
      for (int64_t at : s.nonfinite_at) {
        const auto* p = param_at(ckpt.catalog(), g, rank.rank, at);
        ++r.grad_nonfinite_by_param[p ? p->name : "(padding)"];
      }
    }
    for (const auto& [name, grad] : snap->lp_grads(rank.rank)) {
      const GradScan s = scan(grad);
      r.grads_present = true;
      r.grad_numel += s.numel;
      r.grad_nonfinite += s.nonfinite;
      if (s.nonfinite) r.grad_nonfinite_by_param[name] += s.nonfinite;
    }
  }
  if (any_partition) {
    r.grads_present = true;
    r.recorded_grad_norm = std::sqrt(sum_sq);
  }
  return r;
}

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
