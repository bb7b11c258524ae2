#pragma once
// std::filesystem calls without an error_code throw std::filesystem::filesystem_error; the core's public
// entry points turn it into ckptdoc::Error here, so callers see one exception type (ErrorKind::Io, or
// NotFound when the path is absent) naming the path.
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "ckptdoc/error.h"

namespace ckptdoc::io {

inline Error error_from(const std::filesystem::filesystem_error& e) {
  const std::error_code& c = e.code();
  const bool absent = c == std::errc::no_such_file_or_directory || c == std::errc::not_a_directory;
  return Error(absent ? ErrorKind::NotFound : ErrorKind::Io, e.path1().string(), "", c.message());
}

// Runs `f`, rethrowing a filesystem_error as an Error.
template <class F>
decltype(auto) translating_fs_errors(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const std::filesystem::filesystem_error& e) {
    throw error_from(e);
  }
}

}  // namespace ckptdoc::io
