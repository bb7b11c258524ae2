// The sides of `ckptdoc diff` that a DeepSpeed checkpoint gives: its consolidated fp32 masters, 16-bit
// weights or Adam moments as a DiffSide, unread. Here and not in analysis/ because it reads a
// deepspeed::Checkpoint; the comparison of two sides is analysis::diff (analysis/diff.h).
#include "ckptdoc/sources/deepspeed/diff_side.h"

#include <string>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/export.h"
#include "sources/deepspeed/tensor_convert.h"
#include "sources/deepspeed/tensor_slice.h"

namespace ckptdoc::deepspeed {

using analysis::diff_what_name;
using analysis::DiffOptions;
using analysis::DiffResult;
using analysis::DiffSide;
using analysis::DiffWhat;

namespace {

std::string describe(const Checkpoint& c, DiffWhat what) {
  const auto& cat = c.catalog();
  if (c.weights_only()) return cat.description + " " + cat.tag_dir;
  return "DeepSpeed checkpoint " + cat.tag_dir + " (" + std::string(diff_what_name(what)) + ")";
}

// A moment of every trainable param, consolidated from the ranks' flat partitions like the fp32 masters.
std::vector<NamedTensor> moment_tensors(const Checkpoint& ck, const std::string& key) {
  using namespace deepspeed::detail;
  const auto& cat = ck.catalog();
  if (cat.groups.empty())
    throw Error(ErrorKind::Unsupported, cat.tag_dir, "",
                "no ZeRO or BF16_Optimizer partitions to take " + key + " from");
  std::vector<NamedTensor> out;
  for (const auto& g : cat.groups) {
    std::vector<Tensor> parts;
    for (const auto& rp : g.partitions) {
      auto t = ck.moment_partition(g.index, rp.rank, key);
      if (!t)
        throw Error(ErrorKind::NotFound, cat.tag_dir,
                    "group " + std::to_string(g.index) + ", dp rank " + std::to_string(rp.rank),
                    "no " + key + " saved (an empty or missing optimizer state)");
      parts.push_back(*t);
    }
    for (size_t i = 0; i < g.params.size(); ++i) {
      std::vector<Tensor> pieces;
      for (const auto& rp : g.partitions)
        for (const auto& f : rp.fragments)
          if (f.param == static_cast<int>(i))
            pieces.push_back(slice_1d(parts[static_cast<size_t>(rp.rank)], f.partition_offset, f.numel));
      const DType d = parts.front().dtype;
      out.push_back({g.params[i].name, Tensor::produced(d, g.params[i].shape, [pieces, d](ByteSink& sink) {
                       for (const auto& p : pieces) write_as(p, d, sink);
                     })});
    }
  }
  return out;
}

}  // namespace

std::vector<NamedTensor> diff_tensors(const Checkpoint& ckpt, DiffWhat what) {
  if (ckpt.weights_only()) {
    if (what == DiffWhat::ExpAvg || what == DiffWhat::ExpAvgSq)
      throw Error(ErrorKind::InvalidRequest, ckpt.catalog().tag_dir,
                  "--what " + std::string(diff_what_name(what)),
                  "this is a weights-only source: it holds no optimizer moments");
    deepspeed::ExportOptions o;
    o.device = DeviceKind::Cpu;
    return deepspeed::export_tensors(ckpt, o);
  }
  if (what == DiffWhat::ExpAvg) return moment_tensors(ckpt, "exp_avg");
  if (what == DiffWhat::ExpAvgSq) return moment_tensors(ckpt, "exp_avg_sq");
  deepspeed::ExportOptions o;
  o.device = DeviceKind::Cpu;
  o.source = what == DiffWhat::Lp ? deepspeed::ExportSource::Lp : deepspeed::ExportSource::Fp32;
  return deepspeed::export_tensors(ckpt, o);
}

DiffSide diff_side(const Checkpoint& ckpt, DiffWhat what) {
  return {describe(ckpt, what), diff_tensors(ckpt, what)};
}

DiffResult diff(const Checkpoint& a, const Checkpoint& b, const DiffOptions& options, Progress* progress) {
  return analysis::diff(diff_side(a, options.what), diff_side(b, options.what), options, progress);
}

}  // namespace ckptdoc::deepspeed
