// Source's shared parts: the command names, the capability message and the refusals of the operations a
// source does not override.
#include "ckptdoc/sources/source.h"

#include <array>

namespace ckptdoc::sources {

namespace {

constexpr std::array kCommands{Command::Inspect, Command::Diagnose, Command::Export, Command::Repair,
                               Command::Convert, Command::Diff,     Command::Watch};

}  // namespace

std::string_view command_name(Command command) {
  switch (command) {
    case Command::Inspect:
      return "inspect";
    case Command::Diagnose:
      return "diagnose";
    case Command::Export:
      return "export";
    case Command::Repair:
      return "repair";
    case Command::Convert:
      return "convert";
    case Command::Diff:
      return "diff";
    case Command::Watch:
      return "watch";
  }
  return "?";
}

std::string Source::supported_commands() const {
  std::vector<std::string_view> names;
  for (const Command c : kCommands)
    if (can(c)) names.push_back(command_name(c));
  if (names.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += "`" + std::string(names[i]) + "`";
  }
  return out;
}

Error Source::refusal(const std::string& path, std::optional<Command> command) const {
  const std::string asked = command
                                ? "`ckptdoc " + std::string(command_name(*command)) + "` does not read it yet"
                                : "this command does not read it yet";
  return {ErrorKind::Unsupported, path, "",
          std::string(description()) + " (source \"" + std::string(name()) + "\"): " + asked +
              "; ckptdoc reads it with " + supported_commands()};
}

Outcome Source::inspect(const InspectRequest& request) const {
  throw refusal(request.path, Command::Inspect);
}

Outcome Source::diagnose(const DiagnoseRequest& request) const {
  throw refusal(request.path, Command::Diagnose);
}

ExportOutcome Source::export_weights(const ExportRequest& request) const {
  throw refusal(request.path, Command::Export);
}

Outcome Source::repair(const RepairRequest& request) const {
  throw refusal(request.path, Command::Repair);
}

WeightTensors Source::weight_tensors(const std::string& path) const {
  throw refusal(path, Command::Diff);
}

WeightTensors Source::moment_tensors(const std::string& path, const std::string& moment) const {
  throw Error(ErrorKind::InvalidRequest, path, "--what " + moment,
              std::string(description()) + " is compared by its weights only");
}

FindingRepair finding_repair(const Source& source, model::RepairKind kind, const std::string& path) {
  std::optional<RepairAction> action;
  std::string mark;
  switch (kind) {
    case model::RepairKind::None:
      return {};
    case model::RepairKind::RefreshFp32:
      action = RepairAction::RefreshFp32, mark = "{refresh_fp32}";
      break;
    case model::RepairKind::ResetOptimizer:
      action = RepairAction::ResetOptimizer, mark = "{reset_optimizer}";
      break;
    case model::RepairKind::DropOptimizer:
      action = RepairAction::DropOptimizer, mark = "{drop_optimizer}";
      break;
    case model::RepairKind::Repartition:
      mark = "{repartition}";
      break;
    case model::RepairKind::RestoreModelFiles:
      mark = "{restore_model_files}";
      break;
  }
  const std::string fix =
      "This finding's fix, " + mark + ", does not apply to " + std::string(source.description()) + ": ";
  if (!action) return {std::nullopt, fix + "its repair is DeepSpeed's, not this source's"};
  if (auto why = source.repair_refusal(*action, path)) return {std::nullopt, fix + *why};
  return {action, std::nullopt};
}

}  // namespace ckptdoc::sources
