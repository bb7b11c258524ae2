#include "ckptdoc/format/zip_writer.h"

#include <algorithm>

#include "ckptdoc/error.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/parallel.h"
#include "zip_constants.h"

namespace ckptdoc {
namespace {

// Little-endian record assembly.
class Bytes {
 public:
  Bytes& u16(uint64_t v) { return put(v, 2); }
  Bytes& u32(uint64_t v) { return put(v, 4); }
  Bytes& u64(uint64_t v) { return put(v, 8); }
  Bytes& text(const std::string& s) {
    data_.insert(data_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& append(const Bytes& other) {
    data_.insert(data_.end(), other.data_.begin(), other.data_.end());
    return *this;
  }
  Bytes& fill(uint8_t b, size_t n) {
    data_.insert(data_.end(), n, b);
    return *this;
  }
  std::span<const uint8_t> span() const { return data_; }
  size_t size() const { return data_.size(); }

 private:
  Bytes& put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) data_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  std::vector<uint8_t> data_;
};

bool needs_zip64(uint64_t size, uint64_t offset) {
  return size >= zip::kMax32 || offset >= zip::kMax32;
}
uint64_t clamp32(uint64_t v) {
  return v >= zip::kMax32 ? zip::kMax32 : v;
}
std::string record(const std::string& name) {
  return "record '" + name + "'";
}

// Forwards a streamed record to the archive while computing its CRC and refusing bytes past its size.
class RecordSink : public ByteSink {
 public:
  RecordSink(ByteSink& inner, const std::string& name, uint64_t size)
      : inner_(inner), name_(name), size_(size) {}
  void write(std::span<const uint8_t> bytes) override {
    if (bytes.size() > size_ - count_)
      throw Error("", record(name_),
                  "the writer wrote more than the declared " + std::to_string(size_) + " bytes (" +
                      std::to_string(count_ + bytes.size()) + " so far)");
    crc_ = crc32_update(crc_, bytes);
    inner_.write(bytes);
    count_ += bytes.size();
  }
  uint64_t position() const override { return count_; }
  // The kernel copies the bytes while another thread reads them from the mapping for the CRC (a few MiB at a
  // time, dropped after): the record costs about one copy, not a copy plus a read.
  void write_file_range(const MappedFile& file, uint64_t offset, uint64_t length) override {
    if (length > size_ - count_)
      throw Error("", record(name_),
                  "the writer wrote more than the declared " + std::to_string(size_) + " bytes (" +
                      std::to_string(count_ + length) + " so far)");
    const auto all = file.slice(offset, length, "tensor bytes");
    uint32_t crc = crc_;
    auto checksum = [&] {
      constexpr uint64_t kStep = 8 << 20;
      for (uint64_t done = 0; done < length; done += kStep) {
        const uint64_t n = std::min(kStep, length - done);
        if (done + n < length) file.will_need(offset + done + n, std::min(kStep, length - done - n));
        crc = crc32_update(crc, all.subspan(done, n));
        file.dont_need(offset + done, n);
      }
    };
    if (length < (16u << 20)) {
      checksum();
      inner_.write_file_range(file, offset, length);
    } else {
      // The CRC beside the copy, on a pool thread when one is free (either order is correct).
      run_on_workers(2, [&](unsigned w) {
        if (w == 0)
          inner_.write_file_range(file, offset, length);
        else
          checksum();
      });
    }
    crc_ = crc;
    count_ += length;
  }
  uint32_t crc() const { return crc_; }

 private:
  ByteSink& inner_;
  const std::string& name_;
  uint64_t size_;
  uint64_t count_ = 0;
  uint32_t crc_ = 0;
};

}  // namespace

ZipWriter::ZipWriter(ByteSink& sink, uint64_t alignment) : sink_(sink), alignment_(alignment) {
  // The padding lives in a 16-bit extra field next to a ZIP64 field of up to 28 bytes.
  if (alignment_ == 0 || alignment_ > 0x8000)
    throw Error(ErrorKind::InvalidRequest, "", "",
                expected_found("a zip alignment between 1 and 32768", std::to_string(alignment_)));
}

void ZipWriter::check_usable(const std::string& name) {
  if (failed_)
    throw Error("", record(name), "cannot add: an earlier record failed, the archive is incomplete");
  if (finished_) throw Error("", record(name), "cannot add: the archive is already finished");
  if (name.empty() || name.size() > zip::kMax16)
    throw Error(ErrorKind::InvalidRequest, "", record(name),
                expected_found("a name of 1 to 65535 bytes", std::to_string(name.size())));
  if (names_.count(name))
    throw Error(ErrorKind::InvalidRequest, "", record(name), "is already in the archive");
}

void ZipWriter::write_local_header(const std::string& name, uint64_t size) {
  const uint64_t cursor = sink_.position();
  const bool zip64 = needs_zip64(size, cursor);
  Bytes z64;
  if (zip64) {
    const uint64_t len = (size >= zip::kMax32 ? 16 : 0) + (cursor >= zip::kMax32 ? 8 : 0);
    z64.u16(zip::kZip64ExtraId).u16(len);
    // Like torch (miniz): the compressed size is 0 here; the data descriptor and central directory hold it.
    if (size >= zip::kMax32) z64.u64(size).u64(0);
    if (cursor >= zip::kMax32) z64.u64(cursor);
  }
  const uint64_t start = cursor + zip::kLocalSize + name.size() + z64.size() + 4;
  const uint64_t pad = (alignment_ - start % alignment_) % alignment_;
  Bytes h;
  h.u32(zip::kSigLocal)
      .u16(0)                       // version needed: torch writes 0 for stored records
      .u16(size ? 0x0808 : 0x0800)  // UTF-8 names; data descriptor follows when there is data
      .u16(0)                       // stored
      .u16(0)
      .u16(0)  // no time or date
      .u32(0)
      .u32(0)
      .u32(0)  // crc and sizes are in the data descriptor
      .u16(name.size())
      .u16(z64.size() + 4 + pad)
      .text(name)
      .append(z64)
      .u16(zip::kPaddingExtraId)  // "FB" padding so that the data starts on the alignment
      .u16(pad)
      .fill('Z', static_cast<size_t>(pad));
  sink_.write(h.span());
}

void ZipWriter::write_descriptor(uint32_t crc, uint64_t size, bool zip64) {
  Bytes d;
  d.u32(zip::kSigDescriptor).u32(crc);
  if (zip64)
    d.u64(size).u64(size);
  else
    d.u32(size).u32(size);
  sink_.write(d.span());
}

void ZipWriter::add(const std::string& name, std::span<const uint8_t> data) {
  add_streamed(name, data.size(), [&](ByteSink& out) { out.write(data); });
}

void ZipWriter::add_streamed(const std::string& name, uint64_t size,
                             const std::function<void(ByteSink&)>& fill) {
  check_usable(name);
  failed_ = true;  // until this record is complete
  const uint64_t offset = sink_.position();
  write_local_header(name, size);
  RecordSink body(sink_, name, size);
  fill(body);
  if (body.position() != size)
    throw Error(
        "", record(name),
        "the writer " + expected_found(std::to_string(size) + " bytes", std::to_string(body.position())));
  if (size > 0) write_descriptor(body.crc(), size, needs_zip64(size, offset));
  written_.push_back(Written{name, offset, size, body.crc()});
  names_.insert(name);
  failed_ = false;
}

void ZipWriter::finish() {
  if (failed_) throw Error("", "", "cannot finish the archive: an earlier record failed");
  if (finished_) throw Error("", "", "the archive is already finished");
  failed_ = true;
  const uint64_t cd_offset = sink_.position();
  for (const Written& w : written_) {
    Bytes z64;
    if (needs_zip64(w.size, w.header_offset)) {
      const uint64_t len = (w.size >= zip::kMax32 ? 16 : 0) + (w.header_offset >= zip::kMax32 ? 8 : 0);
      z64.u16(zip::kZip64ExtraId).u16(len);
      if (w.size >= zip::kMax32) z64.u64(w.size).u64(w.size);
      if (w.header_offset >= zip::kMax32) z64.u64(w.header_offset);
    }
    Bytes c;
    c.u32(zip::kSigCentral)
        .u16(0)  // version made by
        .u16(0)  // version needed
        .u16(w.size ? 0x0808 : 0x0800)
        .u16(0)
        .u16(0)
        .u16(0)
        .u32(w.crc)
        .u32(clamp32(w.size))
        .u32(clamp32(w.size))
        .u16(w.name.size())
        .u16(z64.size())
        .u16(0)  // comment
        .u16(0)  // disk
        .u16(0)  // internal attributes
        .u32(0)  // external attributes
        .u32(clamp32(w.header_offset))
        .text(w.name)
        .append(z64);
    sink_.write(c.span());
  }
  const uint64_t cd_size = sink_.position() - cd_offset;
  const uint64_t zip64_eocd = sink_.position();
  const uint64_t n = written_.size();
  Bytes e;
  e.u32(zip::kSigZip64Eocd)
      .u64(zip::kZip64EocdSize - 12)
      .u16(0x031E)  // made by: as torch (miniz) writes
      .u16(0x002D)  // needed: 4.5, ZIP64
      .u32(0)
      .u32(0)
      .u64(n)
      .u64(n)
      .u64(cd_size)
      .u64(cd_offset);
  e.u32(zip::kSigZip64Locator).u32(0).u64(zip64_eocd).u32(1);
  e.u32(zip::kSigEocd)
      .u16(0)
      .u16(0)
      .u16(n > zip::kMax16 ? zip::kMax16 : n)
      .u16(n > zip::kMax16 ? zip::kMax16 : n)
      .u32(clamp32(cd_size))
      .u32(clamp32(cd_offset))
      .u16(0);
  sink_.write(e.span());
  finished_ = true;
  failed_ = false;
}

}  // namespace ckptdoc
