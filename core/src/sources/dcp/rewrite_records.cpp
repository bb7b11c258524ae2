// Rewriting storage records of a DCP folder in a copy, and publishing the copy (see rewrite_records.h).
#include "sources/dcp/rewrite_records.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ckptdoc/error.h"
#include "ckptdoc/io/fs_error.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/request_field.h"
#include "io/partial_folder.h"
#include "repair/publish.h"
#include "sources/deepspeed/output_folder_check.h"

namespace ckptdoc::dcp {
namespace fs = std::filesystem;
namespace {

uint32_t u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Where, inside one stored torch.save zip (`zip`, the item's bytes), a record's CRC-32 is kept: its central
// directory entry, and the data descriptor after its data when the local header defers to one (torch's writer
// sets flag bit 3 and leaves the local header's CRC 0), else the local header.
std::vector<size_t> crc_fields(std::span<const uint8_t> zip, const ZipEntry& e, const std::string& where) {
  auto bad = [&](const std::string& what) { return Error(ErrorKind::Unsupported, where, e.name, what); };
  size_t eocd = std::string::npos;
  for (size_t i = zip.size() >= 22 ? zip.size() - 22 : 0; i + 1 > 0 && zip.size() - i < 65557; --i)
    if (u32(&zip[i]) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos) throw bad("no end of central directory");
  const uint32_t cd = u32(&zip[eocd + 16]);
  const uint16_t count = u16(&zip[eocd + 10]);
  if (cd == 0xffffffffu || count == 0xffff) throw bad("a ZIP64 item is not rewritten yet");
  std::vector<size_t> out;
  for (size_t at = cd, n = 0; n < count && at + 46 <= zip.size(); ++n) {
    if (u32(&zip[at]) != 0x02014b50) throw bad("central directory entry expected");
    const size_t name_len = u16(&zip[at + 28]), extra = u16(&zip[at + 30]), comment = u16(&zip[at + 32]);
    if (at + 46 + name_len > zip.size()) throw bad("central directory runs past the item");
    if (std::string_view(reinterpret_cast<const char*>(&zip[at + 46]), name_len) == e.name)
      out.push_back(at + 16);
    at += 46 + name_len + extra + comment;
  }
  if (out.size() != 1) throw bad("not one central directory entry");
  const size_t local = e.header_offset;
  if (local + 30 > zip.size()) throw bad("local header runs past the item");
  if (u16(&zip[local + 6]) & 0x8) {
    size_t d = e.data_offset + e.compressed_size;
    if (d + 4 <= zip.size() && u32(&zip[d]) == 0x08074b50) d += 4;
    if (d + 4 > zip.size()) throw bad("data descriptor runs past the item");
    out.push_back(d);
  } else {
    out.push_back(local + 14);
  }
  return out;
}

// fsyncs every file and folder under `dir` (and `dir`), so the rename publishes durable contents.
void sync_tree(const std::string& dir, FileIo& io) {
  auto sync_file = [&](const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(ErrorKind::Io, path, "", std::string("open for fsync: ") + std::strerror(errno));
    const int err = io.fsync(fd);
    io.close(fd);
    if (err != 0) throw Error(ErrorKind::Io, path, "", std::string("fsync: ") + std::strerror(err));
  };
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_directory()) {
      if (const int err = io.fsync_dir(e.path().string()); err != 0)
        throw Error(ErrorKind::Io, e.path().string(), "",
                    std::string("fsync of directory: ") + std::strerror(err));
    } else if (e.is_regular_file()) {
      sync_file(e.path().string());
    }
  }
  if (const int err = io.fsync_dir(dir); err != 0)
    throw Error(ErrorKind::Io, dir, "", std::string("fsync of directory: ") + std::strerror(err));
}

// A zstd item's bytes are not the zip's, and a safetensors-serialized tensor has no zip: no record to patch
// in place.
void refuse_unzipped(const Checkpoint& in, const StorageItem& item, const std::string& where) {
  if (item.zstd)
    throw Error(ErrorKind::Unsupported, where, "",
                "a zstd-compressed item (torch's ZStandard extension): repairs rewrite records in place and "
                "do not re-compress, so nothing was written");
  if (in.in_safetensors(item))
    throw Error(ErrorKind::Unsupported, where, "",
                "a tensor of a safetensors-serialized file (serialization_format=SAFETENSORS): repairs "
                "rewrite torch.save records in place, so nothing was written");
}

}  // namespace

StorageRecord storage_record(const Checkpoint& in, const StorageItem& item, const std::string& key) {
  StorageRecord r;
  r.item = item;
  r.where = item.file + " (" + key + ")";
  refuse_unzipped(in, item, r.where);
  const TorchFile tf = in.open_item(item);
  const auto view = MappedFile::view(in.file(item.file), item.offset, item.length, item.file);
  const ZipReader zip(view);
  const ZipEntry* record = nullptr;
  for (const auto& e : zip.entries())
    if (e.name.rfind(tf.archive_name + "/data/", 0) == 0) {
      if (record) throw Error(ErrorKind::Unsupported, r.where, "", "holds more than one storage record");
      record = &e;
    }
  if (!record) throw Error(ErrorKind::Unsupported, r.where, "", "holds no storage record");
  if (record->method != 0 || record->compressed_size != record->size)
    throw Error(ErrorKind::Unsupported, r.where, record->name, "a compressed record is not rewritten");
  r.entry = *record;
  r.crc_fields = crc_fields(view->bytes(), *record, r.where);
  return r;
}

StorageRecord item_record(const Checkpoint& in, const StorageItem& item, const std::string& key,
                          const std::string& name) {
  StorageRecord r;
  r.item = item;
  r.where = item.file + " (" + key + ")";
  refuse_unzipped(in, item, r.where);
  const TorchFile tf = in.open_item(item);
  const auto view = MappedFile::view(in.file(item.file), item.offset, item.length, item.file);
  const ZipReader zip(view);
  const std::string full = tf.archive_name + "/" + name;
  const ZipEntry* record = nullptr;
  for (const auto& e : zip.entries())
    if (e.name == full) record = &e;
  if (!record) throw Error(ErrorKind::Unsupported, r.where, full, "no such record");
  if (record->method != 0 || record->compressed_size != record->size)
    throw Error(ErrorKind::Unsupported, r.where, full, "a compressed record is not rewritten");
  r.entry = *record;
  r.crc_fields = crc_fields(view->bytes(), *record, r.where);
  return r;
}

StorageRecord file_record(const std::string& dir, const std::string& file, const std::string& name) {
  StorageRecord r;
  const std::string path = dir + "/" + file;
  const auto mapped = MappedFile::open(path);
  r.item.file = file;
  r.item.offset = 0;
  r.item.length = mapped->size();
  r.where = file + " (" + name + ")";
  const ZipReader zip(mapped);
  const ZipEntry* record = nullptr;
  for (const auto& e : zip.entries())
    if (e.name == name) record = &e;
  if (!record) throw Error(ErrorKind::Unsupported, path, name, "no such record");
  if (record->method != 0 || record->compressed_size != record->size)
    throw Error(ErrorKind::Unsupported, path, name, "a compressed record is not rewritten");
  r.entry = *record;
  r.crc_fields = crc_fields(mapped->bytes(), *record, r.where);
  return r;
}

void write_record(const StorageRecord& record, std::span<const uint8_t> data, const std::string& copy_dir) {
  const std::string path = copy_dir + "/" + record.item.file;
  if (data.size() != record.entry.size)
    throw Error(ErrorKind::Inconsistent, path, record.entry.name,
                "the new bytes are not the record's size: not rewritten");
  uint8_t crc[4];
  put32(crc, crc32(data));
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  auto put = [&](uint64_t at, const uint8_t* p, size_t n) {
    f.seekp(static_cast<std::streamoff>(record.item.offset + at));
    f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
  };
  put(record.entry.data_offset, data.data(), data.size());
  for (size_t at : record.crc_fields) put(at, crc, 4);
  f.flush();
  if (!f) throw Error(ErrorKind::Io, path, "", "could not be rewritten");
}

std::string checked_new_output(const std::string& output, const std::vector<std::string>& inputs) {
  // Where any writer's output may go (sources/deepspeed/output_folder_check.h), and stricter: nothing may be
  // there.
  const auto checked = deepspeed::detail::check_output_folder(output, inputs, /*force=*/false);
  if (checked.existed)
    throw Error(ErrorKind::InvalidRequest, checked.path, request_text("{output}"),
                "exists; repair writes a new folder");
  return checked.path;
}

void write_new_folder(const std::string& output, const std::function<void(const std::string& partial)>& fill,
                      const Progress* progress, FileIo& io) {
  deepspeed::detail::remove_dead_leftovers(output);  // what a killed run left, once provably abandoned
  io::PartialFolder partial(output, io);             // removed on failure: nothing half-done stays behind
  try {
    fill(partial.path());
    sync_tree(partial.path(), io);
    if (progress) progress->check();  // a Cancel during the last write or the fsyncs: nothing is published
    bool renamed = false;
    repair::detail::publish_folder(partial.path(), output, io, renamed, /*replace_existing=*/false);
    partial.keep();
  } catch (const fs::filesystem_error& e) {
    throw io::error_from(e);
  }
}

}  // namespace ckptdoc::dcp
