#include "sources/dcp/source_export.h"

#include "ckptdoc/human_bytes.h"
#include "ckptdoc/sources/dcp/export.h"

namespace ckptdoc::sources {

ExportOutcome export_dcp_weights(const dcp::Checkpoint& ckpt, const ExportRequest& request,
                                 const DcpExportContext& context) {
  dcp::ExportOptions options;
  options.input_folder = request.path;
  options.max_shard_size = request.max_shard_size;
  options.force = request.force;
  options.torch = request.torch;
  options.strict = request.strict;
  options.progress = request.progress;
  const dcp::ExportResult r = dcp::export_weights(ckpt, request.output, options);
  ExportOutcome out;
  out.path = r.path;
  out.tensors = r.tensors;
  out.non_finite = r.non_finite;
  if (request.json) {
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
    if (!context.from.empty()) j["from"] = context.from;
    j.update(context.fields);
    out.text = j.dump(2) + "\n";
  } else if (!request.quiet) {
    out.text = "wrote " + std::to_string(r.tensors) + " tensors (" + human_bytes(r.bytes) + ")" +
               (context.from.empty() ? "" : " of " + context.from) + " to " + r.path;
    if (!r.files.empty()) out.text += ":";
    for (const auto& f : r.files) out.text += " " + f;
    out.text += "\nleft out " + std::to_string(r.state_tensors_left_out) + " " + context.left_out + " and " +
                std::to_string(r.bytes_items_left_out) + " bytes items (not weights)\n";
    if (!r.stripped_prefix.empty())
      out.text += "names: '" + r.stripped_prefix + "' stripped (every weight key had it)\n";
    if (!context.note.empty()) out.text += context.note + "\n";
  }
  return out;
}

WeightTensors dcp_weight_tensors(std::shared_ptr<const dcp::Checkpoint> ckpt, const std::string& what) {
  WeightTensors w;
  w.what = what + " (weights)";
  w.tensors = dcp::select_weights(*ckpt).tensors;
  w.keep_alive = std::move(ckpt);  // the tensors read through it
  return w;
}

WeightTensors dcp_moment_tensors(std::shared_ptr<const dcp::Checkpoint> ckpt, const std::string& what,
                                 const std::string& moment) {
  WeightTensors w;
  w.what = what + " (" + moment + ")";
  w.tensors = dcp::select_moments(*ckpt, moment).tensors;
  w.keep_alive = std::move(ckpt);  // the tensors read through it
  return w;
}

}  // namespace ckptdoc::sources
