// Hugging Face Accelerate FSDP save_state folders as a registry source: each part is a DCP folder read by
// sources/dcp/; this file only says which part each command reads and names the files it does not.
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "ckptdoc/error.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/sources/dcp/report_text.h"
#include "ckptdoc/sources/source.h"
#include "sources/accelerate/diagnose.h"
#include "sources/accelerate/drop_refusal.h"
#include "sources/dcp/repair_dcp.h"
#include "sources/dcp/source_export.h"
#include "sources/dcp/storage_map.h"

namespace ckptdoc::sources {

namespace {

std::string part_dir(const accelerate::SaveState& s, const accelerate::Part& p) {
  return (std::filesystem::path(s.dir) / p.folder).string();
}

// load_state reads every optimizer_<i>/ (drop_refusal.h); named by the first.
std::string drop_refusal_of(const std::vector<std::string>& optimizers) {
  return accelerate::drop_refusal((optimizers.empty() ? "optimizer_0" : optimizers.front()) + "/",
                                  "load_fsdp_optimizer");
}

class AccelerateSource final : public Source {
 public:
  std::string_view name() const override { return "accelerate"; }
  std::string_view description() const override { return "a Hugging Face Accelerate FSDP save_state folder"; }
  bool probe(const std::string& path) const override { return accelerate::is_save_state_folder(path); }
  bool can(Command command) const override {
    return command == Command::Inspect || command == Command::Diagnose || command == Command::Export ||
           command == Command::Repair || command == Command::Diff;
  }

  bool exports_torch() const override { return true; }

  Outcome inspect(const InspectRequest& request) const override {
    const auto s = accelerate::read_save_state(request.path);
    nlohmann::json parts = nlohmann::json::array();
    std::string text = "Accelerate FSDP save_state folder " + s.dir + "\n";
    for (const auto& p : s.parts) {
      const auto ckpt = dcp::Checkpoint::open(part_dir(s, p));
      if (request.json)
        parts.push_back({{"folder", p.folder},
                         {"role", p.role},
                         {"index", p.index},
                         {"metadata", nlohmann::json::parse(dcp::metadata_json(*ckpt))}});
      else
        text += "\n== " + p.folder + "/ (" + p.role + ") ==\n" + dcp::inspect_text(*ckpt);
    }
    if (request.json) {
      const nlohmann::json j{
          {"format", "accelerate-fsdp"}, {"path", s.dir}, {"parts", parts}, {"not_read", s.other_files}};
      return {j.dump(1) + "\n", 0};
    }
    text += "\nNot read (torch.save pickles beside the parts):";
    for (const auto& f : s.other_files) text += " " + f;
    return {text + "\n", 0};
  }

  Outcome diagnose(const DiagnoseRequest& request) const override {
    const accelerate::Report r = accelerate::diagnose(request.path);
    return {request.json ? accelerate::report_json(r) + "\n" : accelerate::report_text(r),
            r.has_error() ? 1 : 0};
  }

  // --reset-optimizer: the whole save_state folder copied, each optimizer_<i>/ reset (repair_dcp.h).
  // --drop-optimizer is refused as for a plain save_state folder (drop_refusal.h).
  Outcome repair(const RepairRequest& request) const override {
    const auto s = accelerate::read_save_state(request.path);
    std::vector<std::string> optimizers;
    for (const auto& p : s.parts)
      if (p.role == "optimizer") optimizers.push_back(p.folder);
    if (request.drop_optimizer)
      throw Error(ErrorKind::Unsupported, request.path, request_text("{drop_optimizer}"),
                  request_text(drop_refusal_of(optimizers)));
    if (optimizers.empty() && request.reset_optimizer)
      throw Error(ErrorKind::Unsupported, request.path, request_text("{reset_optimizer}"),
                  "holds no optimizer_<i>/ folder: nothing to reset");
    return repair_dcp_optimizer(request, s.dir, optimizers, "an Accelerate FSDP save_state folder");
  }

  std::optional<std::string> repair_refusal(RepairAction action, const std::string& path) const override {
    if (action == RepairAction::RefreshFp32)  // known from the format alone
      return dcp_refresh_refusal("an Accelerate FSDP save_state folder");
    if (action != RepairAction::DropOptimizer || !accelerate::is_save_state_folder(path)) return std::nullopt;
    try {
      std::vector<std::string> optimizers;
      for (const auto& p : accelerate::read_save_state(path).parts)
        if (p.role == "optimizer") optimizers.push_back(p.folder);
      return drop_refusal_of(optimizers);
    } catch (const Error&) {
      return std::nullopt;  // repair() names what is wrong with the folder
    }
  }

  // The weights of the one model, pytorch_model_fsdp_0/, as dcp::export_weights writes them ("model." off):
  // what `accelerate merge-weights pytorch_model_fsdp_0 OUT` writes.
  ExportOutcome export_weights(const ExportRequest& request) const override {
    const auto s = accelerate::read_save_state(request.path);
    const accelerate::Part& model = the_model(s, request.path, "export");
    DcpExportContext context;
    context.from = model.folder + "/";
    context.fields["not_read"] = s.other_files;
    return export_dcp_weights(*dcp::Checkpoint::open(part_dir(s, model)), request, context);
  }

  WeightTensors weight_tensors(const std::string& path) const override {
    const auto s = accelerate::read_save_state(path);
    const std::string dir = part_dir(s, the_model(s, path, "compare"));
    return dcp_weight_tensors(dcp::Checkpoint::open(dir), "Accelerate FSDP model folder " + dir);
  }

  // The one optimizer folder's moments (optimizer_<i>/), named by the model's params.
  WeightTensors moment_tensors(const std::string& path, const std::string& moment) const override {
    const auto s = accelerate::read_save_state(path);
    std::vector<const accelerate::Part*> optimizers;
    for (const auto& p : s.parts)
      if (p.role == "optimizer") optimizers.push_back(&p);
    if (optimizers.size() != 1)
      throw Error(ErrorKind::Unsupported, path, "--what " + moment,
                  std::to_string(optimizers.size()) +
                      " optimizer folders (optimizer_<i>/): compare one of them by its own path");
    const std::string dir = part_dir(s, *optimizers.front());
    return dcp_moment_tensors(dcp::Checkpoint::open(dir), "Accelerate FSDP optimizer folder " + dir, moment);
  }

 private:
  // The one model folder (pytorch_model_fsdp_<i>/) of a save_state folder; several are refused, to be named
  // one by one.
  static const accelerate::Part& the_model(const accelerate::SaveState& s, const std::string& path,
                                           const std::string& verb) {
    std::vector<const accelerate::Part*> models;
    for (const auto& p : s.parts)
      if (p.role == "model") models.push_back(&p);
    if (models.size() != 1)
      throw Error(ErrorKind::Unsupported, path, "",
                  std::to_string(models.size()) + " model folders (pytorch_model_fsdp_<i>/): " + verb +
                      " one of them by its own path");
    return *models.front();
  }

  // Every part's files under its folder's name (rows "optimizer_0/__1_0.distcp"), its keys as the part stores
  // them.
  std::optional<StorageMap> storage_map(const std::string& path) const override {
    const auto s = accelerate::read_save_state(path);
    StorageMap map;
    map.format = "accelerate-fsdp";
    map.path = s.dir;
    for (const auto& p : s.parts)
      dcp::add_to_storage_map(*dcp::Checkpoint::open(part_dir(s, p)), p.folder + "/", map);
    dcp::sort_storage_map(map);
    return map;
  }

  std::optional<SourceDiagnosis> diagnosis(const std::string& path) const override {
    const accelerate::Report r = accelerate::diagnose(path);
    return dcp::diagnosis_of(r.problems, r.verdict, r.clean, r.not_checked);
  }
};

}  // namespace

std::shared_ptr<const Source> make_accelerate_source() {
  return std::make_shared<AccelerateSource>();
}

}  // namespace ckptdoc::sources
