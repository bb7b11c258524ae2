// Checkpoint::assemble: one trainable param gathered from every rank's flat partitions (reads only the
// slices that hold it) plus its lp tensor from the module.
#include <cstring>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "sources/deepspeed/tensor_slice.h"

namespace ckptdoc::deepspeed {

using detail::slice_1d;

namespace {

// Fills `out` (numel elements) from the fragments of param `index`; false when a rank's tensor is absent.
template <typename Fetch>
bool gather(const GroupLayout& g, int index, int64_t numel, std::vector<float>& out, Fetch fetch) {
  out.assign(static_cast<size_t>(numel), 0.0f);
  for (const auto& rp : g.partitions) {
    std::optional<Tensor> part;
    for (const auto& f : rp.fragments) {
      if (f.param != index) continue;
      if (!part) {
        try {
          part = fetch(rp.rank);
        } catch (const Error&) {
          part.reset();  // a rank missing or unreadable (the catalog names it): the param has no complete
                         // value
        }
        if (!part) {
          out.clear();
          return false;
        }
      }
      const auto vals = slice_1d(*part, f.partition_offset, f.numel).to_float();
      std::memcpy(out.data() + f.param_offset, vals.data(), vals.size() * sizeof(float));
    }
    if (part) part->check_unchanged();  // a file opened for this read alone (a universal param's)
  }
  return true;
}

}  // namespace

ParamData Checkpoint::assemble(int group, int param_index, bool with_moments) const {
  if (group < 0 || static_cast<size_t>(group) >= catalog_.groups.size()) {
    throw Error(ErrorKind::InvalidRequest, catalog_.tag_dir, "group " + std::to_string(group),
                "no such param group");
  }
  const GroupLayout& g = catalog_.groups[static_cast<size_t>(group)];
  if (param_index < 0 || static_cast<size_t>(param_index) >= g.params.size()) {
    throw Error(ErrorKind::InvalidRequest, catalog_.tag_dir,
                "group " + std::to_string(group) + " param " + std::to_string(param_index), "no such param");
  }
  const ParamEntry& p = g.params[static_cast<size_t>(param_index)];
  ParamData d;
  d.name = p.name;
  d.shape = p.shape;
  d.lp = lp_param(p.name);
  gather(g, param_index, p.numel, d.fp32, [&](int r) { return fp32_partition(group, r); });
  if (with_moments) {
    gather(g, param_index, p.numel, d.exp_avg, [&](int r) { return moment_partition(group, r, "exp_avg"); });
    gather(g, param_index, p.numel, d.exp_avg_sq,
           [&](int r) { return moment_partition(group, r, "exp_avg_sq"); });
  }
  check_unchanged();
  return d;
}

}  // namespace ckptdoc::deepspeed
