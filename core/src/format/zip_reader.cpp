#include "ckptdoc/format/zip_reader.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>

#include "ckptdoc/error.h"
#include "format/crc32_clmul.h"
#include "zip_constants.h"

namespace ckptdoc {
namespace {

// ---- CRC-32 (zlib polynomial, reflected), slicing-by-8 ----

struct CrcTables {
  std::array<std::array<uint32_t, 256>, 8> t{};
};

constexpr CrcTables make_crc_tables() {
  CrcTables c;
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t r = i;
    for (int k = 0; k < 8; ++k) r = (r & 1u) ? (r >> 1) ^ 0xEDB88320u : r >> 1;
    c.t[0][i] = r;
  }
  for (size_t s = 1; s < 8; ++s)
    for (size_t i = 0; i < 256; ++i) c.t[s][i] = (c.t[s - 1][i] >> 8) ^ c.t[0][c.t[s - 1][i] & 0xFFu];
  return c;
}

constexpr CrcTables kCrc = make_crc_tables();

uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// ---- little-endian field access over the mapped file ----

uint16_t u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}
uint32_t u32(const uint8_t* p) {
  return load_le32(p);
}
uint64_t u64(const uint8_t* p) {
  return static_cast<uint64_t>(u32(p)) | static_cast<uint64_t>(u32(p + 4)) << 32;
}

std::string hex32(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x00000000";
  for (int i = 9; i >= 2; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 0xFu];
  return s;
}

std::string signature_text(uint32_t sig) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const auto b = static_cast<uint8_t>(sig >> (8 * i));
    if (b >= 0x20 && b < 0x7F) {
      s += static_cast<char>(b);
    } else {
      static const char* digits = "0123456789abcdef";
      s += "\\x";
      s += digits[b >> 4];
      s += digits[b & 0xF];
    }
  }
  return "\"" + s + "\"";
}

std::string method_name(uint16_t method) {
  switch (method) {
    case 0:
      return "stored";
    case 8:
      return "deflate";
    case 9:
      return "deflate64";
    case 12:
      return "bzip2";
    case 14:
      return "lzma";
    case 93:
      return "zstd";
    case 95:
      return "xz";
    case 99:
      return "AES encryption";
    default:
      return "unknown";
  }
}

std::string record(const std::string& name) {
  return "record '" + name + "'";
}

// True when [offset, offset + length) lies inside [0, limit).
bool fits(uint64_t offset, uint64_t length, uint64_t limit) {
  return offset <= limit && length <= limit - offset;
}

struct Directory {
  uint64_t entries = 0;
  uint64_t cd_offset = 0;
  uint64_t cd_size = 0;
  uint64_t cd_limit = 0;  // the central directory must end at or before this offset
};

// Checks one end-of-central-directory candidate at `pos`. Returns an empty string and fills `dir` when it is
// consistent, otherwise the reason it is not (so the last reason can be reported when none fits).
std::string try_eocd(const MappedFile& file, uint64_t pos, Directory& dir) {
  const uint8_t* base = file.bytes().data();
  const uint64_t size = file.size();
  const uint8_t* e = base + pos;
  const uint16_t comment = u16(e + 20);
  if (pos + zip::kEocdSize + comment > size)
    return "end of central directory at " + at_offset(pos) + " declares a " + std::to_string(comment) +
           "-byte comment but only " + std::to_string(size - pos - zip::kEocdSize) + " bytes follow";
  const uint16_t disk = u16(e + 4), cd_disk = u16(e + 6);
  uint64_t on_disk = u16(e + 8), total = u16(e + 10);
  uint64_t cd_size = u32(e + 12), cd_offset = u32(e + 16);
  uint64_t limit = pos;

  if (pos >= zip::kZip64LocatorSize && u32(base + pos - zip::kZip64LocatorSize) == zip::kSigZip64Locator) {
    const uint64_t loc = pos - zip::kZip64LocatorSize;
    const uint8_t* l = base + loc;
    const uint32_t z_disk = u32(l + 4);
    const uint64_t stated = u64(l + 8);
    const uint32_t disks = u32(l + 16);
    if (z_disk != 0 || disks > 1)
      return "ZIP64 locator at " + at_offset(loc) + " describes a multi-disk archive (" +
             std::to_string(disks) + " disks), which is not supported";
    uint64_t rec = stated;
    const auto valid_at = [&](uint64_t at) {
      return fits(at, zip::kZip64EocdSize, loc) && u32(base + at) == zip::kSigZip64Eocd;
    };
    if (!valid_at(rec)) {
      // Data prepended to the archive shifts every offset; miniz then looks right before the locator.
      if (loc >= zip::kZip64EocdSize && valid_at(loc - zip::kZip64EocdSize)) {
        rec = loc - zip::kZip64EocdSize;
      } else {
        std::string found =
            fits(stated, 4, size) ? signature_text(u32(base + stated)) : "the end of the file";
        return "ZIP64 locator at " + at_offset(loc) + " points to " + at_offset(stated) + ": " +
               expected_found("a ZIP64 end of central directory record (\"PK\\x06\\x06\")", found);
      }
    }
    const uint8_t* z = base + rec;
    const uint64_t record_size = u64(z + 4);
    if (record_size < zip::kZip64EocdSize - 12)
      return "ZIP64 end of central directory at " + at_offset(rec) + ": " +
             expected_found("a record size of at least 44", std::to_string(record_size));
    if (u32(z + 16) != 0 || u32(z + 20) != 0)
      return "ZIP64 end of central directory at " + at_offset(rec) +
             " describes a multi-disk archive, which is not supported";
    on_disk = u64(z + 24);
    total = u64(z + 32);
    cd_size = u64(z + 40);
    cd_offset = u64(z + 48);
    limit = rec;
  } else if (disk != 0 || cd_disk != 0) {
    return "end of central directory at " + at_offset(pos) + " describes a multi-disk archive (disk " +
           std::to_string(disk) + "), which is not supported";
  }

  if (on_disk != total)
    return "end of central directory at " + at_offset(pos) + ": " +
           expected_found("the entry count on this disk to equal the total " + std::to_string(total),
                          std::to_string(on_disk));
  if (!fits(cd_offset, cd_size, limit))
    return "central directory of " + std::to_string(cd_size) + " bytes at " + at_offset(cd_offset) +
           " runs past the end records at " + at_offset(limit);
  if (total > cd_size / zip::kCdhSize)
    return "central directory of " + std::to_string(cd_size) + " bytes is too small for " +
           std::to_string(total) + " entries (" + std::to_string(zip::kCdhSize) + " bytes each at least)";
  dir = Directory{total, cd_offset, cd_size, limit};
  return {};
}

Directory find_directory(const MappedFile& file) {
  const uint64_t size = file.size();
  if (size < zip::kEocdSize)
    throw Error(ErrorKind::Truncated, file.path(), "",
                expected_found("a zip archive of at least 22 bytes (the end of central directory record)",
                               std::to_string(size) + " bytes"));
  const uint8_t* base = file.bytes().data();
  const uint64_t last = size - zip::kEocdSize;
  const uint64_t first = last > zip::kMaxComment ? last - zip::kMaxComment : 0;
  std::string reason;
  // Backwards, so the last consistent record wins (a stored record may contain "PK\5\6" by chance).
  for (uint64_t pos = last + 1; pos-- > first;) {
    if (base[pos] != 'P' || u32(base + pos) != zip::kSigEocd) continue;
    Directory dir;
    std::string why = try_eocd(file, pos, dir);
    if (why.empty()) return dir;
    if (reason.empty()) reason = std::move(why);
  }
  if (!reason.empty()) throw Error(ErrorKind::Corrupt, file.path(), "", reason);
  // A zip's directory is at its end: one that starts like a zip and has none was cut short.
  const bool starts_as_zip = u32(base) == zip::kSigLocal;
  throw Error(starts_as_zip ? ErrorKind::Truncated : ErrorKind::Corrupt, file.path(), "",
              "no end of central directory record (\"PK\\x05\\x06\") in the last " +
                  std::to_string(size - first) + " bytes: the file is truncated or is not a zip archive");
}

}  // namespace

uint32_t crc32_update(uint32_t crc, std::span<const uint8_t> bytes) {
  uint32_t c = ~crc;
  const uint8_t* p = bytes.data();
  size_t n = bytes.size();
  if (n >= 256 && detail::crc32_clmul_available()) {  // carry-less multiply: memory speed
    const size_t bulk = n & ~size_t{15};
    c = detail::crc32_clmul(c, p, bulk);
    p += bulk;
    n -= bulk;
  }
  const auto& t = kCrc.t;
  while (n >= 8) {
    const uint32_t lo = c ^ load_le32(p);
    const uint32_t hi = load_le32(p + 4);
    c = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFFu] ^ t[2][(hi >> 8) & 0xFFu] ^ t[1][(hi >> 16) & 0xFFu] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = t[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
  return ~c;
}

uint32_t crc32(std::span<const uint8_t> bytes) {
  return crc32_update(0, bytes);
}

bool ZipReader::looks_like_zip(std::span<const uint8_t> head) {
  return head.size() >= 4 && u32(head.data()) == zip::kSigLocal;
}

ZipReader::ZipReader(std::shared_ptr<const MappedFile> file) : file_(std::move(file)) {
  if (!file_) throw Error("", "", "no file given to the zip reader");
  const std::string& path = file_->path();
  const uint64_t size = file_->size();
  const Directory dir = find_directory(*file_);
  const uint8_t* base = file_->bytes().data();

  entries_.reserve(static_cast<size_t>(dir.entries));
  index_.reserve(static_cast<size_t>(dir.entries));
  std::unordered_map<uint64_t, size_t> headers;  // local header offset -> entry
  uint64_t pos = dir.cd_offset;
  const uint64_t cd_end = dir.cd_offset + dir.cd_size;
  for (uint64_t i = 0; i < dir.entries; ++i) {
    const std::string where = "central directory entry " + std::to_string(i) + " at " + at_offset(pos);
    if (!fits(pos, zip::kCdhSize, cd_end))
      throw Error(ErrorKind::Corrupt, path, where,
                  "runs past the end of the central directory at " + at_offset(cd_end));
    const uint8_t* h = base + pos;
    if (u32(h) != zip::kSigCentral)
      throw Error(ErrorKind::Corrupt, path, where,
                  expected_found("signature \"PK\\x01\\x02\"", signature_text(u32(h))));
    const uint16_t flags = u16(h + 8);
    const uint16_t method = u16(h + 10);
    const uint32_t crc = u32(h + 16);
    uint64_t csize = u32(h + 20), usize = u32(h + 24);
    const uint16_t name_len = u16(h + 28), extra_len = u16(h + 30), comment_len = u16(h + 32);
    uint64_t lho = u32(h + 42);
    const uint64_t var_len = uint64_t{name_len} + extra_len + comment_len;
    if (!fits(pos + zip::kCdhSize, var_len, cd_end))
      throw Error(ErrorKind::Corrupt, path, where,
                  "name, extra field and comment (" + std::to_string(var_len) +
                      " bytes) run past the end of the central directory at " + at_offset(cd_end));
    ZipEntry entry;
    entry.name.assign(reinterpret_cast<const char*>(h + zip::kCdhSize), name_len);
    const std::string rec = record(entry.name);
    if (flags & 1u)
      throw Error(ErrorKind::Unsupported, path, rec,
                  "is encrypted (flag bit 0 set); encrypted records are not supported");

    // ZIP64 extended information: 64-bit values for the fields saturated at 0xFFFFFFFF, in fixed order.
    const uint8_t* x = h + zip::kCdhSize + name_len;
    const uint8_t* x_end = x + extra_len;
    while (x_end - x >= 4) {
      const uint16_t id = u16(x), len = u16(x + 2);
      if (len > x_end - x - 4)
        throw Error(ErrorKind::Corrupt, path, rec,
                    "extra field 0x" + hex32(id).substr(6) + " of " + std::to_string(len) +
                        " bytes runs past the end of the entry's extra data");
      if (id == zip::kZip64ExtraId) {
        const uint8_t* v = x + 4;
        uint16_t left = len;
        const auto take = [&](uint64_t& field, const char* what) {
          if (left < 8)
            throw Error(ErrorKind::Corrupt, path, rec,
                        std::string("ZIP64 extra field has no room for the 64-bit ") + what + ": " +
                            expected_found("at least 8 more bytes", std::to_string(left)));
          field = u64(v);
          v += 8;
          left = static_cast<uint16_t>(left - 8);
        };
        if (usize == zip::kMax32) take(usize, "uncompressed size");
        if (csize == zip::kMax32) take(csize, "compressed size");
        if (lho == zip::kMax32) take(lho, "local header offset");
      }
      x += 4 + len;
    }

    if (method == 0 && csize != usize)
      throw Error(ErrorKind::Corrupt, path, rec,
                  "is stored (not compressed) but its compressed size " + std::to_string(csize) +
                      " differs from its uncompressed size " + std::to_string(usize));

    // Local header: its own sizes are ignored (torch writes zeros), only its name and extra lengths matter.
    if (!fits(lho, zip::kLocalSize, size))
      throw Error(ErrorKind::Truncated, path, rec,
                  "local header at " + at_offset(lho) + " runs past the end of the file (" +
                      std::to_string(size) + " bytes)");
    const uint8_t* l = base + lho;
    if (u32(l) != zip::kSigLocal)
      throw Error(ErrorKind::Corrupt, path, rec,
                  "local header at " + at_offset(lho) + ": " +
                      expected_found("signature \"PK\\x03\\x04\"", signature_text(u32(l))));
    const uint64_t data_offset = lho + zip::kLocalSize + u16(l + 26) + u16(l + 28);
    if (!fits(data_offset, csize, dir.cd_offset))
      throw Error(ErrorKind::Corrupt, path, rec,
                  "data of " + std::to_string(csize) + " bytes at " + at_offset(data_offset) +
                      " runs past the start of the central directory at " + at_offset(dir.cd_offset));

    entry.data_offset = data_offset;
    entry.size = usize;
    entry.compressed_size = csize;
    entry.crc32 = crc;
    entry.method = method;
    entry.header_offset = lho;
    // Two records with one name, or sharing one local header, read differently in different readers (torch
    // takes one of them): such a file is refused, naming both, rather than trusted either way.
    if (const auto [it, fresh] = index_.emplace(entry.name, entries_.size()); !fresh)
      throw Error(ErrorKind::Corrupt, path, rec,
                  "appears twice in the central directory (entries " + std::to_string(it->second) + " and " +
                      std::to_string(entries_.size()) + "): which one a reader takes is undefined");
    if (const auto [it, fresh] = headers.emplace(lho, entries_.size()); !fresh)
      throw Error(ErrorKind::Corrupt, path, rec,
                  "shares its local header at " + at_offset(lho) + " with " +
                      record(entries_[it->second].name) +
                      ": two names for one record, which readers resolve differently");
    entries_.push_back(std::move(entry));
    pos += zip::kCdhSize + var_len;
  }
}

const ZipEntry* ZipReader::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::span<const uint8_t> ZipReader::data(const ZipEntry& entry) const {
  if (entry.method != 0)
    throw Error(ErrorKind::Unsupported, file_->path(), record(entry.name),
                "is compressed with method " + std::to_string(entry.method) + " (" +
                    method_name(entry.method) + "); only stored (method 0) records can be read");
  return file_->slice(entry.data_offset, entry.size, ("data of " + record(entry.name)).c_str());
}

bool ZipReader::verify_crc(const ZipEntry& entry) const {
  return crc32(data(entry)) == entry.crc32;
}

}  // namespace ckptdoc
