// Weights folders that keep their optimizer beside the weights (optimizer_folder.h: a Hugging Face Trainer
// checkpoint-N/ without DeepSpeed, an Accelerate save_state folder) as a registry source: the catalog reads
// them for every command but repair, whose --reset-optimizer and --drop-optimizer this source writes.
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "ckptdoc/error.h"
#include "ckptdoc/plural.h"
#include "ckptdoc/request_field.h"
#include "ckptdoc/short_list.h"
#include "ckptdoc/sources/source.h"
#include "optimizer_folder.h"
#include "repair_folder.h"

namespace ckptdoc::sources {

namespace {

std::string step_text(double v) {
  return v == static_cast<double>(static_cast<int64_t>(v)) ? std::to_string(static_cast<int64_t>(v))
                                                           : std::to_string(v);
}

constexpr std::string_view kNoMasters = "its weights are the training's own, with no masters to refresh";

class WeightsFolderSource final : public Source {
 public:
  std::string_view name() const override { return "weights-folder"; }
  std::string_view description() const override {
    return "a Hugging Face Trainer or Accelerate weights folder with its optimizer file";
  }
  bool probe(const std::string& path) const override { return weights_folder::is_optimizer_folder(path); }
  bool can(Command /*command*/) const override { return true; }
  // Read by the catalog (weights/weights_source.h, its optimizer file checked beside the weights) ...
  bool reads_into_catalog() const override { return true; }
  // ... but repaired here: the catalog's repairs are DeepSpeed's.
  bool repairs_itself() const override { return true; }

  Outcome repair(const RepairRequest& request) const override {
    const int actions = int{request.reset_optimizer} + int{request.drop_optimizer};
    if (actions != 1 || request.refresh_fp32 || !request.other_actions.empty()) {
      std::string asked;
      for (const auto& [on, name] : {std::pair{request.refresh_fp32, "{refresh_fp32}"},
                                     std::pair{request.reset_optimizer && actions > 1, "{reset_optimizer}"},
                                     std::pair{request.drop_optimizer && actions > 1, "{drop_optimizer}"}})
        if (on) asked += (asked.empty() ? "" : ", ") + request_text(name);
      for (const auto& a : request.other_actions) asked += (asked.empty() ? "" : ", ") + a;
      throw Error(
          ErrorKind::Unsupported, request.path, asked.empty() ? "repair" : asked,
          request_text("a weights folder with its optimizer file (Trainer, Accelerate) is repaired with "
                       "{reset_optimizer} alone (the Adam moments zeroed and the step 0) or "
                       "{drop_optimizer} alone (the Trainer's optimizer.pt left out); " +
                       std::string(kNoMasters)));
    }
    const auto folder = weights_folder::read_optimizer_folder(request.path);
    return request.reset_optimizer ? reset(folder, request) : drop(folder, request);
  }

  std::optional<std::string> repair_refusal(RepairAction action, const std::string& path) const override {
    if (action == RepairAction::RefreshFp32) return std::string(kNoMasters);
    if (action != RepairAction::DropOptimizer || !weights_folder::is_optimizer_folder(path))
      return std::nullopt;
    try {
      return weights_folder::drop_refusal(weights_folder::read_optimizer_folder(path));
    } catch (const Error&) {
      return std::nullopt;  // repair() names what is wrong with the folder
    }
  }

 private:
  static Outcome reset(const weights_folder::OptimizerFolder& folder, const RepairRequest& request) {
    const auto r = weights_folder::reset_optimizer(folder, request.output, request.progress);
    size_t params = 0, tensors = 0, records = 0;
    double step_before = 0;
    nlohmann::json files = nlohmann::json::array();
    std::vector<std::string> names;
    for (const auto& f : r.files) {
      params += f.params, tensors += f.tensors, records += f.records;
      step_before = std::max(step_before, f.step_before);
      names.push_back(f.file);
      files.push_back({{"file", f.file},
                       {"params", f.params},
                       {"tensors", f.tensors},
                       {"records", f.records},
                       {"step_before", f.step_before}});
    }
    const bool trainer = folder.framework == weights_folder::Framework::Trainer;
    const std::string loads =
        trainer ? "the Trainer (resume_from_checkpoint) loads" : "Accelerator.load_state loads";
    if (request.json) {
      const nlohmann::json j = {
          {"output", r.output}, {"action", "reset-optimizer"}, {"params", params}, {"tensors", tensors},
          {"records", records}, {"step_before", step_before},  {"files", files},   {"kept", r.kept},
          {"verified", true}};
      return {j.dump(2) + "\n", 0};
    }
    return {
        "Reset the Adam state of " + plural(params, "param") + " in " + joined(names) + " (" +
            plural(tensors, "moment and step tensor") + ", " + plural(records, "storage record") +
            " zeroed in a copy), the step from " + step_text(step_before) +
            " to 0, every other byte the input's.\nWrote " + r.output +
            "\nVerified: every moment and step in the copy reads as zero; " + loads +
            " it as a fresh Adam (its first step is step 1). The weights, param groups (lr ...), scheduler "
            "and RNG states are the input's: " +
            joined(r.kept) + " copied byte for byte.\n",
        0};
  }

  static Outcome drop(const weights_folder::OptimizerFolder& folder, const RepairRequest& request) {
    const auto r = weights_folder::drop_optimizer(folder, request.output, request.progress);
    if (request.json) {
      const nlohmann::json j = {{"output", r.output},
                                {"action", "drop-optimizer"},
                                {"files_dropped", r.dropped},
                                {"bytes_dropped", r.bytes},
                                {"kept", r.kept},
                                {"verified", true}};
      return {j.dump(2) + "\n", 0};
    }
    return {"Dropped the optimizer: " + joined(r.dropped) + " (" + std::to_string(r.bytes) +
                " bytes) left out; " + joined(r.kept) + " copied byte for byte.\nWrote " + r.output +
                "\nThe Trainer resumes from it (resume_from_checkpoint) with a fresh optimizer, and with a "
                "fresh LR scheduler too: it loads scheduler.pt only beside an optimizer file "
                "(Trainer._load_optimizer_and_scheduler).\n",
            0};
  }
};

}  // namespace

std::shared_ptr<const Source> make_weights_folder_source() {
  return std::make_shared<WeightsFolderSource>();
}

}  // namespace ckptdoc::sources
