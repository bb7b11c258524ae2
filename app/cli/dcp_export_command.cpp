// `ckptdoc export DCP_DIR -o OUT`: the model weights of a PyTorch Distributed Checkpoint as safetensors.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/dcp/export.h"
#include "ckptdoc/weights/shards.h"
#include "commands.h"
#include "format_helpers.h"
#include "non_finite_warning.h"

namespace ckptdoc::cli {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The DeepSpeed export's options that mean nothing here (or are not built for DCP yet) are refused by name
// rather than ignored: a user asking for bfloat16 must not get float32 silently.
void refuse_other_options(const ExportCommandOptions& o) {
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
  if ((!o.format.empty() && o.format != "safetensors") || (o.format.empty() && torch_name))
    given.push_back("--format (only safetensors)");
  if (given.empty()) return;
  std::string list;
  for (const auto& g : given) list += (list.empty() ? "" : ", ") + g;
  throw Error(
      ErrorKind::Unsupported, o.path, list,
      "not available for a PyTorch Distributed Checkpoint: its export writes the weights as stored, in "
      "safetensors (one file, or shards with --max-shard-size)");
}

}  // namespace

int run_dcp_export(const ExportCommandOptions& o) {
  try {
    refuse_other_options(o);
    const auto ckpt = dcp::Checkpoint::open(o.path);
    dcp::ExportOptions options;
    if (!o.max_shard_size.empty()) options.max_shard_size = weights::parse_shard_size(o.max_shard_size);
    options.force = o.force;
    options.strict = o.strict;
    const dcp::ExportResult r = dcp::export_weights(*ckpt, o.output, options);
    deepspeed::ExportResult said;
    said.path = r.path;
    said.tensors = r.tensors;
    said.non_finite = r.non_finite;
    warn_non_finite(said);
    const std::string left_out = std::to_string(r.state_tensors_left_out) +
                                 " optimizer/scheduler/train-state tensors and " +
                                 std::to_string(r.bytes_items_left_out) + " bytes items (not weights)";
    if (o.json) {
      nlohmann::json nf = nlohmann::json::array();
      for (const auto& t : r.non_finite)
        nf.push_back({{"name", t.name}, {"nan", t.nan}, {"inf", t.inf}, {"numel", t.numel}});
      nlohmann::json j{{"path", r.path},
                       {"tensors", r.tensors},
                       {"bytes", r.bytes},
                       {"files", r.files},
                       {"state_tensors_left_out", r.state_tensors_left_out},
                       {"bytes_items_left_out", r.bytes_items_left_out},
                       {"stripped_prefix", r.stripped_prefix},
                       {"non_finite", nf}};
      std::printf("%s\n", j.dump(2).c_str());
    } else if (!o.quiet) {
      std::printf("wrote %zu tensors (%s) to %s", r.tensors, human_bytes(r.bytes).c_str(), r.path.c_str());
      if (!r.files.empty()) std::printf(":");
      for (const auto& f : r.files) std::printf(" %s", f.c_str());
      std::printf("\nleft out %s\n", left_out.c_str());
      if (!r.stripped_prefix.empty())
        std::printf("names: '%s' stripped (every weight key had it)\n", r.stripped_prefix.c_str());
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "ckptdoc export: error [%s]: %s\n", std::string(kind_name(e.kind())).c_str(),
                 e.what());
    return 2;
  }
}

}  // namespace ckptdoc::cli
