// `ckptdoc diff A B --what exp_avg|exp_avg_sq --json` against torch's comparison of the same saves
// (tests/fixtures/dcp/diff_reference.py --what: each param's moment read by dcp_to_torch_save at torch's or
// megatron-core's key), tensor by tensor. Shared by the real-save tests of each format that keeps Adam
// moments.
#pragma once

#include <QJsonArray>
#include <QJsonObject>
#include <algorithm>
#include <cmath>
#include <string>

#include "realds_support.h"

namespace ckptdoc::test::realds {

struct MomentsDiff {
  std::string problems;  // empty when ckptdoc and torch agree on every tensor
  int tensors = 0;       // compared by both
  int different = 0;     // tensors with an unequal element
  double max_abs = 0;    // the largest max |A-B| torch measured
};

// `judged_a` / `judged_b` are the folders the judge reads (a DCP folder, or an Accelerate save_state folder);
// `a` / `b` what ckptdoc is given (the same, or a Megatron save folder whose tracker names `judged_*`).
inline MomentsDiff moments_diff_against_torch(const std::string& a, const std::string& b,
                                              const std::string& judged_a, const std::string& judged_b,
                                              const std::string& moment) {
  MomentsDiff out;
  const auto judge = python_with_deepspeed(
      {source_dir() + "/tests/fixtures/dcp/diff_reference.py", judged_a, judged_b, "--what", moment}, "0.19");
  if (judge.exit_code != 0) return {"judge failed: " + describe(judge)};
  const auto want = parse(judge.out.substr(judge.out.rfind("\n{") + 1));
  const auto torch = want["tensors"].toObject();
  const auto r = run_cli({"diff", a, b, "--what", moment, "--json"});
  const auto got = parse(r.out);
  std::string& p = out.problems;
  if (got["removed"].toArray().size() != want["only_a"].toArray().size() ||
      got["added"].toArray().size() != want["only_b"].toArray().size())
    p += "names only on one side differ from torch's\n";
  const auto tensors = got["tensors"].toArray();
  if (tensors.size() != torch.size())
    p += "ckptdoc compared " + std::to_string(tensors.size()) + " tensors, torch " +
         std::to_string(torch.size()) + "\n";
  for (const auto& v : tensors) {
    const auto t = v.toObject();
    const auto name = t["name"].toString();
    const auto w = torch[name].toObject();
    const std::string n = name.toStdString() + ": ";
    if (w.isEmpty()) {
      p += n + "not compared by torch\n";
      continue;
    }
    const double numel = w["numel"].toDouble();
    const double exact = w["exact"].toDouble();
    if (t["numel"].toDouble() != numel) p += n + "numel\n";
    if (t["dtype_a"] != w["dtype_a"] || t["dtype_b"] != w["dtype_b"]) p += n + "dtypes\n";
    if (std::llround(t["exact_fraction"].toDouble() * numel) != std::llround(exact))
      p += n + "equal elements: ckptdoc " + std::to_string(t["exact_fraction"].toDouble() * numel) +
           ", torch " + std::to_string(exact) + "\n";
    if (t["nonfinite_mismatches"].toDouble() != w["nonfinite"].toDouble()) p += n + "non-finite mismatches\n";
    const bool inf = w["max_abs"].isNull();
    if (inf ? t["max_abs_diff"].toString() != "inf" : t["max_abs_diff"].toDouble() != w["max_abs"].toDouble())
      p += n + "max |A-B|: ckptdoc " + QJsonValue(t["max_abs_diff"]).toVariant().toString().toStdString() +
           ", torch " + QJsonValue(w["max_abs"]).toVariant().toString().toStdString() + "\n";
    ++out.tensors;
    out.different += exact == numel ? 0 : 1;
    if (!inf) out.max_abs = std::max(out.max_abs, w["max_abs"].toDouble());
  }
  if (got["equal"].toBool() != (out.different == 0)) p += "\"equal\" is not torch's verdict\n";
  if (r.exit_code != (out.different == 0 ? 0 : 1)) p += "exit " + std::to_string(r.exit_code) + "\n";
  if (!p.empty()) p += r.out + r.err;
  return out;
}

}  // namespace ckptdoc::test::realds
