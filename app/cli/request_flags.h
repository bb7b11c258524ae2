#pragma once
#include <string>

#include "ckptdoc/request_field.h"

namespace ckptdoc::cli {

// "--lp-source": the flag that sets a request field.
std::string cli_flag(RequestField field);

}  // namespace ckptdoc::cli
