#pragma once
// What an export that wrote NaN or Inf must say beside "Exported N tensors": the file holds weights no model
// can use. Both views show this text; the CLI says the same on stderr (export_command.cpp).
#include <cstddef>
#include <string>

#include "ckptdoc/sources/deepspeed/export_options.h"

namespace ckptdoc::deepspeed {

// Empty when every value written is finite; else "PATH holds NaN or Inf values in N of M tensors:" and a line
// per tensor ("name: a NaN, b Inf of c values"), at most `shown` of them, then "… K more".
std::string non_finite_warning(const ExportResult& result, size_t shown = 5);

}  // namespace ckptdoc::deepspeed
