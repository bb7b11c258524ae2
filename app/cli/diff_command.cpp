// `ckptdoc diff A B`: two checkpoints of any format ckptdoc reads (DeepSpeed, Hugging Face folders, weights
// files, DCP / Accelerate / Megatron-core folders), compared tensor by tensor.
// Exit 0 equal, 1 different, 2 unusable input.
#include <cmath>
#include <cstdio>

#include "ckptdoc/analysis/diff.h"
#include "ckptdoc/error.h"
#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/sources/diff_side.h"
#include "commands.h"
#include "format_helpers.h"
#include "progress_bar.h"

namespace ckptdoc::cli {
namespace {

std::string num(double v) {
  if (std::isinf(v)) return "inf";
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

void print_text(const analysis::DiffResult& r, int max_rows) {
  size_t different = 0;
  for (const auto& d : r.compared) different += d.same() ? 0 : 1;
  std::printf("A: %s\nB: %s\n", r.a.c_str(), r.b.c_str());
  std::printf(
      "%zu tensors compared: %zu equal, %zu different; %zu only in A, %zu only in B, %zu changed shape\n",
      r.compared.size(), r.compared.size() - different, different, r.removed.size(), r.added.size(),
      r.shape_changed.size());
  if (!r.removed.empty()) {
    std::printf("\nonly in A (removed):\n");
    for (const auto& n : r.removed) std::printf("  %s\n", n.c_str());
  }
  if (!r.added.empty()) {
    std::printf("\nonly in B (added):\n");
    for (const auto& n : r.added) std::printf("  %s\n", n.c_str());
  }
  if (!r.shape_changed.empty()) {
    std::printf("\nshape changed:\n");
    for (const auto& d : r.shape_changed)
      std::printf("  %s: %s -> %s\n", d.name.c_str(), shape_text(d.shape_a).c_str(),
                  shape_text(d.shape_b).c_str());
  }
  if (different == 0) return;
  std::printf("\n%-44s %-19s %12s %9s %11s %11s\n", "tensor (worst first)", "dtype", "numel", "exact%",
              "max|A-B|", "rel L2");
  int shown = 0;
  for (const auto& d : r.compared) {
    if (d.same()) break;
    if (shown++ >= max_rows) {
      std::printf("… %zu more differing tensors (use --json for all)\n",
                  different - static_cast<size_t>(max_rows));
      break;
    }
    const std::string dtype = d.dtype_a == d.dtype_b ? std::string(dtype_name(d.dtype_a))
                                                     : std::string(dtype_name(d.dtype_a)) + "->" +
                                                           std::string(dtype_name(d.dtype_b));
    const std::string name = d.name.size() > 44 ? "…" + d.name.substr(d.name.size() - 43) : d.name;
    std::printf("%-44s %-19s %12llu %9.3f %11s %11s\n", name.c_str(), dtype.c_str(),
                static_cast<unsigned long long>(d.numel), d.exact_fraction() * 100.0, num(d.max_abs).c_str(),
                num(d.rel_l2()).c_str());
  }
}

}  // namespace

int run_diff(const DiffCommandOptions& o) {
  try {
    analysis::DiffOptions options;
    options.what = analysis::parse_diff_what(o.what);
    options.atol = o.atol;
    options.rtol = o.rtol;
    if (!(options.atol >= 0) || !(options.rtol >= 0)) throw Error("", "--atol/--rtol", "must be >= 0");
    const auto a = sources::open_diff_side(o.a, options.what);
    const auto b = sources::open_diff_side(o.b, options.what);
    Progress progress;
    analysis::DiffResult r;
    {
      ProgressBar bar(progress);
      r = analysis::diff(a.side, b.side, options, &progress);
    }
    if (o.json)
      std::printf("%s\n", analysis::diff_json(r).c_str());
    else
      print_text(r, o.max_rows);
    return r.equal() ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc diff: error [%s]: %s\n", std::string(kind_name(e.kind())).c_str(),
                 e.what());
    return 2;
  }
}

}  // namespace ckptdoc::cli
