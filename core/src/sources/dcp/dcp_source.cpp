// PyTorch Distributed Checkpoint folders as a registry source: inspect, diagnose and export, each through the
// functions beside this file.
#include <memory>

#include "ckptdoc/sources/dcp/diagnose.h"
#include "ckptdoc/sources/dcp/metadata.h"
#include "ckptdoc/sources/dcp/report_text.h"
#include "ckptdoc/sources/source.h"
#include "sources/dcp/repair_dcp.h"
#include "sources/dcp/source_export.h"
#include "sources/dcp/storage_map.h"

namespace ckptdoc::sources {

namespace {

class DcpSource final : public Source {
 public:
  std::string_view name() const override { return "dcp"; }
  std::string_view description() const override { return "a PyTorch Distributed Checkpoint"; }
  bool probe(const std::string& path) const override { return dcp::is_dcp_folder(path); }
  bool exports_torch() const override { return true; }
  bool can(Command command) const override {
    return command == Command::Inspect || command == Command::Diagnose || command == Command::Export ||
           command == Command::Repair || command == Command::Diff;
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

  // --reset-optimizer only (repair_dcp.h).
  Outcome repair(const RepairRequest& request) const override {
    return repair_dcp_optimizer(request, request.path, {"."}, "a PyTorch Distributed Checkpoint");
  }

  // Known from the format alone: the views leave "Refresh fp32 masters" off with this reason.
  std::optional<std::string> repair_refusal(RepairAction action, const std::string& /*path*/) const override {
    if (action != RepairAction::RefreshFp32) return std::nullopt;
    return dcp_refresh_refusal("a PyTorch Distributed Checkpoint");
  }

  ExportOutcome export_weights(const ExportRequest& request) const override {
    return export_dcp_weights(*dcp::Checkpoint::open(request.path), request);
  }

  WeightTensors weight_tensors(const std::string& path) const override {
    return dcp_weight_tensors(dcp::Checkpoint::open(path), "PyTorch Distributed Checkpoint " + path);
  }

  WeightTensors moment_tensors(const std::string& path, const std::string& moment) const override {
    return dcp_moment_tensors(dcp::Checkpoint::open(path), "PyTorch Distributed Checkpoint " + path, moment);
  }

  std::optional<StorageMap> storage_map(const std::string& path) const override {
    const auto ckpt = dcp::Checkpoint::open(path);
    StorageMap map;
    map.format = "pytorch-dcp";
    map.path = ckpt->dir();
    dcp::add_to_storage_map(*ckpt, "", map);
    return map;
  }

  std::optional<SourceDiagnosis> diagnosis(const std::string& path) const override {
    const dcp::Report r = dcp::diagnose(*dcp::Checkpoint::open(path));
    return dcp::diagnosis_of(r.problems, r.verdict, r.clean, r.not_checked);
  }
};

}  // namespace

std::shared_ptr<const Source> make_dcp_source() {
  return std::make_shared<DcpSource>();
}

}  // namespace ckptdoc::sources
