// The CLI names the request fields of the core's refusals by its own flags (request_field.h); main()
// registers cli_flag before any command runs.
#include "request_flags.h"

namespace ckptdoc::cli {

std::string cli_flag(RequestField field) {
  switch (field) {
    case RequestField::RefreshFp32:
      return "--refresh-fp32";
    case RequestField::ResetOptimizer:
      return "--reset-optimizer";
    case RequestField::DropOptimizer:
      return "--drop-optimizer";
    case RequestField::Repartition:
      return "--repartition";
    case RequestField::RestoreModelFiles:
      return "--restore-model-files";
    case RequestField::WorldSize:
      return "--world-size";
    case RequestField::Target:
      return "--target";
    case RequestField::LpSource:
      return "--lp-source";
    case RequestField::AllowShapeChange:
      return "--allow-shape-change";
    case RequestField::AllowUnsafePickle:
      return "--allow-unsafe-pickle";
    case RequestField::Force:
      return "--force";
    case RequestField::Output:
      return "--output";
    case RequestField::AcrossProcesses:
      return "mpirun";
  }
  return std::string(request_field_id(field));
}

}  // namespace ckptdoc::cli
