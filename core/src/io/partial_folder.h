#pragma once
// The folder a writer fills before it publishes it as its output: "<output>.ckptdoc-partial-<pid>", made by
// this run and claimed (WriterLock) while it is written. A folder of that name that is already there is not
// this run's and is never removed: on one host it is a killed run's leftover that remove_dead_leftovers could
// not yet prove abandoned, on storage shared between hosts it may be a live writer's.
#include <optional>
#include <string>

#include "ckptdoc/io/file_io.h"
#include "io/writer_lock.h"

namespace ckptdoc::io {

class PartialFolder {
 public:
  // Makes the folder: throws OutputExists when something of its name exists, Io when mkdir fails.
  PartialFolder(const std::string& output, FileIo& io);
  PartialFolder(const PartialFolder&) = delete;
  PartialFolder& operator=(const PartialFolder&) = delete;
  // Removes the folder with all in it unless keep() was called: nothing half-done stays behind.
  ~PartialFolder();

  const std::string& path() const { return path_; }
  // The folder was renamed into place: the destructor leaves what is now the output alone.
  void keep() { kept_ = true; }

 private:
  std::string path_;
  std::optional<WriterLock> claim_;  // killed, this folder is removed by the next run at once
  bool kept_ = false;
};

// "<output>.ckptdoc-partial-<pid>": the name a writer with process id `pid` fills before publishing `output`.
std::string partial_folder_name(const std::string& output, long pid);

}  // namespace ckptdoc::io
