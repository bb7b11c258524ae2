// PyTorch Distributed Checkpoint folders as a registry source: inspect, diagnose and export, each through the
// functions beside this file.
#include <memory>
#include <nlohmann/json.hpp>

#include "ckptdoc/human_bytes.h"
#include "ckptdoc/sources/dcp/diagnose.h"
#include "ckptdoc/sources/dcp/export.h"
#include "ckptdoc/sources/dcp/metadata.h"
#include "ckptdoc/sources/dcp/report_text.h"
#include "ckptdoc/sources/source.h"

namespace ckptdoc::sources {

namespace {

class DcpSource final : public Source {
 public:
  std::string_view name() const override { return "dcp"; }
  std::string_view description() const override { return "a PyTorch Distributed Checkpoint"; }
  bool probe(const std::string& path) const override { return dcp::is_dcp_folder(path); }
  bool exports_torch() const override { return true; }
  bool can(Command command) const override {
    return command == Command::Inspect || command == Command::Diagnose || command == Command::Export;
  }

  Outcome inspect(const InspectRequest& request) const override {
    const auto ckpt = dcp::Checkpoint::open(request.path);
    return {request.json ? dcp::metadata_json(*ckpt) + "\n" : dcp::inspect_text(*ckpt), 0};
  }

  Outcome diagnose(const DiagnoseRequest& request) const override {
    const auto ckpt = dcp::Checkpoint::open(request.path);
    const dcp::Report report = dcp::diagnose(*ckpt);
    return {request.json ? dcp::report_json(*ckpt, report) + "\n" : dcp::diagnose_text(*ckpt, report),
            report.has_error() ? 1 : 0};
  }

  ExportOutcome export_weights(const ExportRequest& request) const override {
    const auto ckpt = dcp::Checkpoint::open(request.path);
    dcp::ExportOptions options;
    options.max_shard_size = request.max_shard_size;
    options.force = request.force;
    options.torch = request.torch;
    options.strict = request.strict;
    const dcp::ExportResult r = dcp::export_weights(*ckpt, request.output, options);
    ExportOutcome out;
    out.path = r.path;
    out.tensors = r.tensors;
    out.non_finite = r.non_finite;
    if (request.json) {
      nlohmann::json nf = nlohmann::json::array();
      for (const auto& t : r.non_finite)
        nf.push_back({{"name", t.name}, {"nan", t.nan}, {"inf", t.inf}, {"numel", t.numel}});
      const nlohmann::json j{{"path", r.path},
                             {"tensors", r.tensors},
                             {"bytes", r.bytes},
                             {"files", r.files},
                             {"state_tensors_left_out", r.state_tensors_left_out},
                             {"bytes_items_left_out", r.bytes_items_left_out},
                             {"stripped_prefix", r.stripped_prefix},
                             {"non_finite", nf}};
      out.text = j.dump(2) + "\n";
    } else if (!request.quiet) {
      out.text =
          "wrote " + std::to_string(r.tensors) + " tensors (" + human_bytes(r.bytes) + ") to " + r.path;
      if (!r.files.empty()) out.text += ":";
      for (const auto& f : r.files) out.text += " " + f;
      out.text += "\nleft out " + std::to_string(r.state_tensors_left_out) +
                  " optimizer/scheduler/train-state tensors and " + std::to_string(r.bytes_items_left_out) +
                  " bytes items (not weights)\n";
      if (!r.stripped_prefix.empty())
        out.text += "names: '" + r.stripped_prefix + "' stripped (every weight key had it)\n";
    }
    return out;
  }
};

}  // namespace

std::shared_ptr<const Source> make_dcp_source() {
  return std::make_shared<DcpSource>();
}

}  // namespace ckptdoc::sources
