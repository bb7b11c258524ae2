#pragma once
// The fields of a request that a refusal names. The core writes a field into its text as a mark
// ("{lp_source}") and names it through request_text, as the process's front end registered at start-up: the
// CLI by its flag (app/cli/request_flags.cpp), the apps by their controls' labels
// (session::request_field_label). So the Qt dialog never tells a user to "pass --lp-source", and the core
// knows no front end's spelling.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace ckptdoc {

enum class RequestField : uint8_t {
  RefreshFp32,        // RepairRequest::refresh_fp32
  ResetOptimizer,     // reset_optimizer
  DropOptimizer,      // drop_optimizer
  Repartition,        // world_size or target: the re-partitioning repair as a whole
  RestoreModelFiles,  // restore_model_files
  WorldSize,          // world_size
  Target,             // target
  LpSource,           // lp_source
  AllowShapeChange,   // allow_shape_change
  AllowUnsafePickle,  // allow_unsafe_pickle
  Force,              // force
  Output,             // the output folder
  AcrossProcesses,    // across_processes (several MPI processes)
};
inline constexpr int kRequestFieldCount = 13;

// "lp_source": the RepairRequest member's name, stable (marks, JSON, tests).
std::string_view request_field_id(RequestField field);
std::optional<RequestField> request_field_from_id(std::string_view id);
// `text` with every mark of a known field replaced by name(field); anything else (braces included) unchanged.
std::string render_request_fields(std::string_view text,
                                  const std::function<std::string(RequestField)>& name);

// How this process's front end names a field in the core's text. Set once at start-up, before any work;
// unset (a library user, the core tests), a field is named by its id ("lp_source").
using RequestFieldNamer = std::string (*)(RequestField);
void set_request_field_namer(RequestFieldNamer namer);
// `text` with every mark named as the registered front end names it: what refusals and plan warnings carry.
std::string request_text(std::string_view text);
// The same, then each "{}" replaced in order by the next of `literals` (paths, names from a checkpoint),
// which are never rendered: a folder named "{force}" stays so named.
std::string request_text(std::string_view text, std::initializer_list<std::string_view> literals);

}  // namespace ckptdoc
