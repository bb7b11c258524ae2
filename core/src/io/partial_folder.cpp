#include "io/partial_folder.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ckptdoc/error.h"

namespace ckptdoc::io {

std::string partial_folder_name(const std::string& output, long pid) {
  return output + ".ckptdoc-partial-" + std::to_string(pid);
}

PartialFolder::PartialFolder(const std::string& output, FileIo& io)
    : path_(partial_folder_name(output, ::getpid())) {
  if (const int err = io.mkdir(path_); err == EEXIST)
    throw Error(ErrorKind::OutputExists, path_, "",
                "exists and was not made by this run; it is left as it is (remove it if no ckptdoc run "
                "writes there, or choose another output)");
  else if (err != 0)
    throw Error(ErrorKind::Io, path_, "", std::string("mkdir: ") + std::strerror(err));
  claim_.emplace(path_);
}

PartialFolder::~PartialFolder() {
  if (kept_) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace ckptdoc::io
