#pragma once
// How the desktop views (Qt and ImGui, views/*/repair*) name a request field in the core's refusals: by the
// label of the control that sets it, or, for an option only the CLI has, by saying so. Each view registers
// it at start-up (set_request_field_namer, request_field.h).
#include <string>

#include "ckptdoc/request_field.h"

namespace ckptdoc::session {

std::string request_field_label(RequestField field);

}  // namespace ckptdoc::session
