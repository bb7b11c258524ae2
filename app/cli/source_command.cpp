// `ckptdoc inspect` / `diagnose` / `export` on a path a self-reporting source reads (sources/source.h; today
// PyTorch Distributed Checkpoint folders): prints what the source returns. Same exit codes as the catalog's
// forms: 0 ok, 1 problems found, 2 unusable input or a command the source cannot do.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/weights/shards.h"
#include "commands.h"
#include "non_finite_warning.h"
#include "progress_bar.h"

namespace ckptdoc::cli {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `--format torch`, or no --format and a torch file name (.bin, .pt, .pth) as the catalog export reads it.
bool wants_torch(const ExportCommandOptions& o) {
  if (!o.format.empty()) return o.format == "torch";
  return ends_with(o.output, ".bin") || ends_with(o.output, ".pt") || ends_with(o.output, ".pth");
}

// The catalog export's options (sources::ExportRequest has none of them) are refused by name rather than
// ignored: a user asking for bfloat16 must not get float32 silently.
void refuse_catalog_export_options(const sources::Source& source, const ExportCommandOptions& o) {
  std::vector<std::string> given;
  if (o.tag) given.push_back("--tag");
  if (!o.dtype.empty()) given.push_back("--dtype");
  if (o.source != "fp32") given.push_back("--source");
  if (o.exclude_frozen) given.push_back("--exclude-frozen");
  if (o.tp_rank >= 0) given.push_back("--tp-rank");
  if (o.tp_rules) given.push_back("--tp-rules");
  const bool torch_name = ends_with(o.output, ".bin") || ends_with(o.output, ".pt") ||
                          ends_with(o.output, ".pth") || ends_with(o.output, ".h5") ||
                          ends_with(o.output, ".hdf5");
  const bool torch_ok = source.exports_torch() && wants_torch(o);
  if (!torch_ok && ((!o.format.empty() && o.format != "safetensors") || (o.format.empty() && torch_name)))
    given.push_back(source.exports_torch() ? "--format (safetensors or torch)"
                                           : "--format (only safetensors)");
  if (given.empty()) return;
  std::string list;
  for (const auto& g : given) list += (list.empty() ? "" : ", ") + g;
  throw Error(ErrorKind::Unsupported, o.path, list,
              "not available for " + std::string(source.description()) +
                  ": its export writes the weights as stored, in " +
                  (source.exports_torch() ? "safetensors or torch" : "safetensors") +
                  " (one file, or shards with --max-shard-size)");
}

// Runs one of the source's operations: its refusal or any other Error is printed with its kind (exit 2).
template <typename Operation>
int run_operation(const sources::Source& source, sources::Command command, const std::string& path,
                  Operation&& operation) {
  const std::string name(sources::command_name(command));
  try {
    if (!source.can(command)) throw source.refusal(path, command);
    const sources::Outcome out = operation();
    std::fputs(out.text.c_str(), stdout);
    return out.exit_code;
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc %s: error [%s]: %s\n", name.c_str(),
                 std::string(kind_name(e.kind())).c_str(), e.what());
    return 2;
  }
}

}  // namespace

int run_source_inspect(const sources::Source& source, const InspectOptions& o) {
  return run_operation(source, sources::Command::Inspect, o.path,
                       [&] { return source.inspect({.path = o.path, .json = o.json}); });
}

int run_source_repair(const sources::Source& source, const RepairOptions& o) {
  sources::RepairRequest rq{.path = o.path,
                            .output = o.output,
                            .refresh_fp32 = o.refresh_fp32,
                            .reset_optimizer = o.reset_optimizer,
                            .drop_optimizer = o.drop_optimizer,
                            .other_actions = {},
                            .json = o.json};
  const std::pair<bool, const char*> others[] = {{!o.lp_source.empty(), "--lp-source"},
                                                 {o.restore_model_files, "--restore-model-files"},
                                                 {o.repartition, "--repartition"},
                                                 {o.dry_run, "--dry-run"},
                                                 {o.force, "--force"}};
  for (const auto& [given, flag] : others)
    if (given) rq.other_actions.emplace_back(flag);
  return run_operation(source, sources::Command::Repair, o.path, [&] { return source.repair(rq); });
}

int run_source_diagnose(const sources::Source& source, const DiagnoseOptions& o) {
  return run_operation(source, sources::Command::Diagnose, o.path, [&] {
    Progress progress;
    const ProgressBar bar(progress);  // the hashing of --verify-checksums, on a terminal
    return source.diagnose(
        {.path = o.path, .json = o.json, .verify_checksums = o.verify_checksums, .progress = &progress});
  });
}

int run_source_export(const sources::Source& source, const ExportCommandOptions& o) {
  return run_operation(source, sources::Command::Export, o.path, [&]() -> sources::Outcome {
    refuse_catalog_export_options(source, o);
    sources::ExportRequest request;
    request.path = o.path;
    request.output = o.output;
    if (!o.max_shard_size.empty()) request.max_shard_size = weights::parse_shard_size(o.max_shard_size);
    request.force = o.force;
    request.torch = source.exports_torch() && wants_torch(o);
    request.strict = o.strict;
    request.json = o.json;
    request.quiet = o.quiet;
    sources::ExportOutcome out = source.export_weights(request);
    deepspeed::ExportResult said;  // the warning every export prints, the catalog's included
    said.path = out.path;
    said.tensors = out.tensors;
    said.non_finite = out.non_finite;
    warn_non_finite(said);
    return out;
  });
}

}  // namespace ckptdoc::cli
