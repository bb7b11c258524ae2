#pragma once
// The machinery of the repairs that rewrite tensor bytes of a DCP folder in place in a copy (Megatron's
// --refresh-fp32, --reset-optimizer of DCP, Accelerate and Megatron folders): every storage item is a whole
// torch.save zip inside a `.distcp`, so a record rewritten with bytes of the same size, and that record's
// CRC-32 fields, leave every offset `.metadata` names valid. The copy is written into
// "<output>.ckptdoc-partial-<pid>" and published with the repair module's publish (never replacing or
// deleting what this run did not create).
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/file_io.h"
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::dcp {

// The one storage record of a storage item, as read from the input.
struct StorageRecord {
  StorageItem item;                // where the item's zip lies (the same file and offset in the copy)
  ZipEntry entry;                  // the record (offsets relative to the item's first byte)
  std::vector<size_t> crc_fields;  // where its CRC-32 is kept, relative to the item's first byte
  std::string where;               // "file (key)" for messages
};

// The record of `item` (a chunk's item or one of its replicas; `key` names it in messages). Throws
// ckptdoc::Error Unsupported when the item holds more than one record, a compressed one or ZIP64 fields, and
// the read errors of Checkpoint::open_item.
StorageRecord storage_record(const Checkpoint& in, const StorageItem& item, const std::string& key);

// The record of `item` whose name is "<archive>/<name>" ("data.pkl": a bytes item's pickle, a ShardedObject's
// torch.save), as storage_record reads it. Throws ckptdoc::Error Unsupported for a missing or compressed
// record.
StorageRecord item_record(const Checkpoint& in, const StorageItem& item, const std::string& key,
                          const std::string& name);

// The record `name` ("common/data/0", "common/data.pkl") of a whole torch.save file `file` in `dir`
// (Megatron's common.pt): item.file is `file`, relative to `dir` and to the copy. Throws ckptdoc::Error
// Unsupported for a missing or compressed record or ZIP64 fields, Io/Corrupt when the file cannot be read.
StorageRecord file_record(const std::string& dir, const std::string& file, const std::string& name);

// Writes `data` (the record's size exactly) over the record in the copy at `copy_dir` (same file names and
// offsets as the input), with its CRC-32. Throws ckptdoc::Error Io naming the file.
void write_record(const StorageRecord& record, std::span<const uint8_t> data, const std::string& copy_dir);

// The output of a repair that writes a new folder: normalised, neither inside `inputs` (folders) nor
// existing. Throws ckptdoc::Error InvalidRequest (where: the output field, request_text).
std::string checked_new_output(const std::string& output, const std::vector<std::string>& inputs);

// Makes "<output>.ckptdoc-partial-<pid>" (refusing one that exists: it is not this run's), lets `fill` write
// the new folder's contents into it, fsyncs every file and folder in it, then renames it to `output` without
// replacing anything there (rename_noreplace: another process's folder at `output`, even an empty one, is
// kept and this throws OutputExists) and fsyncs the parent. On any failure the partial folder, this run's,
// is removed and `output` is as it was. A Cancel on `progress` seen after `fill` and the fsyncs, right before
// the rename, throws Cancelled and publishes nothing.
void write_new_folder(const std::string& output, const std::function<void(const std::string& partial)>& fill,
                      const Progress* progress = nullptr, FileIo& io = current_io());

}  // namespace ckptdoc::dcp
