// Live-engine numbers of a DeepSpeed snapshot: the manifest's scalars and a pass over the recorded gradients
// (L2 norm and NaN/Inf, attributed to params through the partition layout). The rules on them are
// analysis::live_findings (analysis/live_findings.cpp).
#include "ckptdoc/sources/deepspeed/live_report.h"

#include <cmath>
#include <cstring>

#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/snapshot.h"

namespace ckptdoc::deepspeed {

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

}  // namespace ckptdoc::deepspeed
