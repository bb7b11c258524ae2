// `ckptdoc export PATH -o FILE`: consolidated weights, streamed one tensor at a time.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/analysis/export_gate.h"
#include "ckptdoc/error.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/checkpoint/repair.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "ckptdoc/sources/deepspeed/export.h"
#include "ckptdoc/sources/registry.h"
#include "ckptdoc/weights/shards.h"
#include "commands.h"
#include "device_choice.h"
#include "format_helpers.h"
#include "non_finite_warning.h"

namespace ckptdoc::cli {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string format_for(const std::string& output) {
  if (ends_with(output, ".bin") || ends_with(output, ".pt") || ends_with(output, ".pth")) return "torch";
  if (ends_with(output, ".h5") || ends_with(output, ".hdf5")) return "hdf5";
  return "safetensors";
}

// An export of stale masters (DeepSpeed #762) writes random initial values as "the weights" with exit 0: the
// diagnosis is asked first (one read of the masters and weights, not the moments), and the user chooses what
// to export.
void refuse_stale_masters(const deepspeed::Checkpoint& ckpt, const std::string& path) {
  if (ckpt.weights_only()) return;
  analysis::DiagnoseOptions d;
  d.device = DeviceKind::Cpu;
  d.masters_only = true;
  analysis::Report report;
  try {
    report = deepspeed::diagnose(ckpt, d);
  } catch (const Error&) {
    return;  // what keeps the diagnosis from finishing stops the export too, with its own error
  }
  const auto reason = analysis::stale_masters_reason(report);
  if (!reason) return;
  // The repair named is one the planner runs here (with --reset-optimizer when the moments do not fit).
  repair::settle_fixes(ckpt, report.findings);
  std::string flags = "--refresh-fp32";
  for (const auto& f : report.findings)
    if (f.code == model::code_name(model::Code::Fp32MasterMismatch) && f.details.count("fix"))
      flags = f.details.at("fix");
  throw Error(path, "--source fp32",
              *reason +
                  ". Export the 16-bit weights with --source lp, repair the masters first (ckptdoc repair " +
                  path + " -o OUT " + flags + "), or pass --force to export the masters as they are");
}

}  // namespace

int run_export(const ExportCommandOptions& o) {
  if (const auto source = sources::find_source(o.path); !source->reads_into_catalog())
    return run_source_export(*source, o);
  using namespace ckptdoc::deepspeed;
  OpenOptions open;
  open.tag = o.tag;
  const auto ckpt = Checkpoint::open(o.path, open);
  for (const auto& p : ckpt->catalog().problems) {
    if (p.severity == model::Severity::Error)
      std::fprintf(stderr, "ckptdoc: %s: %s\n", p.code.c_str(), p.message.c_str());
    // the export reads the optimizer files only: say what beside them it left out
    if (p.code == model::code_name(model::Code::NvmeOffloadNotRead))
      std::fprintf(stderr, "ckptdoc: warning: %s: %s\n", p.code.c_str(), p.message.c_str());
  }
  ExportOptions options;
  // A folder has no extension to go by: shards are safetensors unless --format says otherwise.
  options.format = parse_export_format(!o.format.empty()           ? o.format
                                       : !o.max_shard_size.empty() ? "safetensors"
                                                                   : format_for(o.output));
  if (!o.max_shard_size.empty()) options.max_shard_size = weights::parse_shard_size(o.max_shard_size);
  options.force = o.force;
  options.merge_differing_replicated = o.force;
  options.source = parse_export_source(o.source);
  if (!o.dtype.empty()) {
    const auto d = dtype_from_name(o.dtype);
    if (!d) throw Error("", "--dtype", "unknown dtype '" + o.dtype + "'");
    options.dtype = *d;
  }
  options.exclude_frozen = o.exclude_frozen;
  options.tp_rank = o.tp_rank;
  options.tp_rules = o.tp_rules;
  // Only a dtype change uses the device: plain exports do not settle (or mention) "auto".
  options.device = o.dtype.empty() && o.device == "auto" ? DeviceKind::Cpu : choose_device(o.device);
  options.strict = o.strict;
  if (options.source == ExportSource::Fp32 && !o.force) refuse_stale_masters(*ckpt, o.path);
  const ExportResult r = export_weights(*ckpt, o.output, options);
  warn_non_finite(r);
  for (const auto& n : r.notes) std::fprintf(stderr, "ckptdoc: warning: %s\n", n.c_str());
  if (o.json) {
    nlohmann::json nf = nlohmann::json::array();
    for (const auto& t : r.non_finite)
      nf.push_back({{"name", t.name}, {"nan", t.nan}, {"inf", t.inf}, {"numel", t.numel}});
    nlohmann::json j{
        {"path", r.path},   {"tensors", r.tensors}, {"bytes", r.bytes},          {"files", r.files},
        {"non_finite", nf}, {"notes", r.notes},     {"companions", r.companions}};
    std::printf("%s\n", j.dump(2).c_str());
  } else if (!o.quiet) {
    if (r.files.empty()) {
      std::printf("wrote %zu tensors (%s) to %s\n", r.tensors, human_bytes(r.bytes).c_str(), r.path.c_str());
    } else {
      std::printf("wrote %zu tensors (%s) to %s:", r.tensors, human_bytes(r.bytes).c_str(), r.path.c_str());
      for (const auto& f : r.files) std::printf(" %s", f.c_str());
      std::printf("\n");
    }
    if (!r.companions.empty()) {
      std::printf("copied from the model folder, for from_pretrained:");
      for (const auto& f : r.companions) std::printf(" %s", f.c_str());
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace ckptdoc::cli
