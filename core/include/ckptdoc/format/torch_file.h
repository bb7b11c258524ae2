#pragma once
// torch.save files: the zip format (torch >= 1.6) and the legacy stacked-pickle format, read lazily over a
// memory map (tensors are views on mapped storage records), and written so that torch.load accepts them
// (with weights_only=True when the tree holds only tensors and plain containers).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckptdoc/format/unpickler.h"
#include "ckptdoc/format/value.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/file_io.h"

namespace ckptdoc {

enum class TorchFormat : uint8_t { Zip, Legacy };

struct TorchFile {
  std::string path;
  TorchFormat format = TorchFormat::Zip;
  std::string archive_name;  // zip prefix folder
  Value root;
  std::vector<std::shared_ptr<Storage>> storages;  // in first-seen order
  int pickle_protocol = 0;
  std::vector<std::string> globals;    // every GLOBAL the pickle named
  std::vector<PickleUse> pickle_uses;  // what torch.load would import and call (see pickle_safety.h)
  uint64_t file_size = 0;
  std::shared_ptr<const MappedFile> file;

  // Reads the pickle and the storage table; storage bytes stay on disk until touched.
  // Throws ckptdoc::Error naming the file, record or offset and what was wrong.
  static TorchFile open(const std::string& path, const UnpickleLimits& limits = {});
  // Same over an already mapped (or in-memory) file.
  static TorchFile open(std::shared_ptr<const MappedFile> file, const UnpickleLimits& limits = {});
  static bool is_torch_file(std::span<const uint8_t> head);
  // What the pickles of a file would import and call, as far as they can be read: for files open() refuses
  // (a hostile stream may be malformed for ckptdoc and still run in torch.load). Never throws for bad
  // content.
  static std::vector<PickleUse> pickle_uses_of(const std::string& path);
};

struct TorchWriteOptions {
  TorchFormat format = TorchFormat::Zip;
  std::string archive_name = "archive";
};

// Writes `root` as a torch.save file (atomically: temp file, fsync, rename). Storages shared by several
// tensors are written once. Storage bytes are streamed from their source.
void write_torch_file(const std::string& path, const Value& root, const TorchWriteOptions& options = {},
                      FileIo& io = current_io());
// Same, into any sink (no atomic rename).
void write_torch(ByteSink& sink, const Value& root, const TorchWriteOptions& options = {});

}  // namespace ckptdoc
