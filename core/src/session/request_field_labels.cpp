#include "ckptdoc/session/request_field_labels.h"

namespace ckptdoc::session {

std::string request_field_label(RequestField field) {
  // The quoted words are the controls' own (views/qt/repair_actions.cpp, repair_dialog.cpp,
  // views/imgui/window_repair.cpp); keep them equal.
  switch (field) {
    case RequestField::RefreshFp32:
      return "\u201cRefresh fp32 masters\u201d";
    case RequestField::ResetOptimizer:
      return "\u201cReset optimizer state\u201d";
    case RequestField::DropOptimizer:
      return "\u201cDrop optimizer state\u201d";
    case RequestField::Repartition:
      return "\u201cRe-partition\u201d";
    case RequestField::RestoreModelFiles:
      return "\u201cRestore missing ZeRO-3 model files\u201d";
    case RequestField::WorldSize:
      return "\u201cNew data-parallel size\u201d";
    case RequestField::Target:
      return "\u201cTemplate checkpoint\u201d";
    case RequestField::Output:
      return "\u201cOutput folder\u201d";
    // Options the views do not offer: the command line has them.
    case RequestField::LpSource:
      return "a consolidated 16-bit weights file (the command line's --lp-source)";
    case RequestField::AllowShapeChange:
      return "the command line's --allow-shape-change";
    case RequestField::AllowUnsafePickle:
      return "the command line's --allow-unsafe-pickle";
    case RequestField::Force:
      return "a new, empty output folder (the command line's --force replaces one)";
    case RequestField::AcrossProcesses:
      return "several MPI processes";
  }
  return std::string(request_field_id(field));
}

}  // namespace ckptdoc::session
