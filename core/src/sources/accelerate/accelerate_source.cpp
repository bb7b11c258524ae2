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
#include "sources/accelerate/drop_optimizer.h"
#include "sources/dcp/repair_dcp.h"
#include "sources/dcp/source_export.h"
#include "sources/dcp/storage_map.h"

namespace ckptdoc::sources {

namespace {

std::string part_dir(const accelerate::SaveState& s, const accelerate::Part& p) {
  return (std::filesystem::path(s.dir) / p.folder).string();
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

  // --reset-optimizer: the whole save_state folder copied, each optimizer_<i>/ reset (repair_dcp.h);
  // --drop-optimizer alone: the folder without its optimizer_<i>/ (drop_optimizer.h).
  Outcome repair(const RepairRequest& request) const override {
    const auto s = accelerate::read_save_state(request.path);
    std::vector<std::string> optimizers;
    for (const auto& p : s.parts)
      if (p.role == "optimizer") optimizers.push_back(p.folder);
    if (optimizers.empty() && request.reset_optimizer)
      throw Error(ErrorKind::Unsupported, request.path, request_text("{reset_optimizer}"),
                  "holds no optimizer_<i>/ folder: nothing to reset");
    if (request.drop_optimizer && !request.reset_optimizer && !request.refresh_fp32 &&
        request.other_actions.empty())
      return drop(request);
    return repair_dcp_optimizer(request, s.dir, optimizers, "an Accelerate FSDP save_state folder");
  }

  // --drop-optimizer alone: the folder without its optimizer_<i>/ (accelerate/drop_optimizer.h).
  static Outcome drop(const RepairRequest& request) {
    const auto r = accelerate::drop_optimizer(request.path, request.output, request.progress);
    if (request.json) {
      const nlohmann::json j = {
          {"output", r.output},     {"action", "drop-optimizer"}, {"folders_dropped", r.dropped},
          {"keys_dropped", r.keys}, {"bytes_dropped", r.bytes},   {"kept", r.kept},
          {"verified", true}};
      return {j.dump(2) + "\n", 0};
    }
    std::string dropped, kept;
    for (const auto& d : r.dropped) dropped += (dropped.empty() ? "" : ", ") + d;
    for (const auto& k : r.kept) kept += (kept.empty() ? "" : ", ") + k;
    return {
        "Dropped the optimizer: " + dropped + " (" + std::to_string(r.keys) + " keys, " +
            std::to_string(r.bytes) + " bytes) left out; " + kept + " copied byte for byte.\nWrote " +
            r.output +
            "\nLoad it as a weights-only resume: Accelerate's load_state reads optimizer_<i>/ for every "
            "prepared optimizer, so prepare the model with a fresh optimizer and load the model with "
            "accelerate.utils.load_fsdp_model(accelerator.state.fsdp_plugin, accelerator, model, DIR), what "
            "load_state calls for it.\n",
        0};
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
