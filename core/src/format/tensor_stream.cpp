#include "format/tensor_stream.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "ckptdoc/error.h"

namespace ckptdoc::detail {
namespace {

std::string tensor_where(const std::string& name) {
  return "tensor '" + name + "'";
}

// Counts what a producer writes, so a producer that writes the wrong number of bytes is caught.
class CountingSink : public ByteSink {
 public:
  explicit CountingSink(ByteSink& inner) : inner_(inner) {}
  void write(std::span<const uint8_t> bytes) override {
    inner_.write(bytes);
    count_ += bytes.size();
  }
  uint64_t position() const override { return count_; }
  void write_file_range(const MappedFile& file, uint64_t offset, uint64_t length) override {
    inner_.write_file_range(file, offset, length);
    count_ += length;
  }

 private:
  ByteSink& inner_;
  uint64_t count_ = 0;
};

// The storage's bytes in memory or in the mapped file (clipped to what exists), or nullopt for
// producer-only storages.
std::optional<std::span<const uint8_t>> storage_span(const Storage& s) {
  if (s.file) {
    const auto all = s.file->bytes();
    if (s.file_offset > all.size()) return std::span<const uint8_t>{};
    const uint64_t len = std::min<uint64_t>(s.nbytes(), all.size() - s.file_offset);
    return all.subspan(static_cast<size_t>(s.file_offset), static_cast<size_t>(len));
  }
  if (s.owned) {
    const uint64_t len = std::min<uint64_t>(s.nbytes(), s.owned->size());
    return std::span<const uint8_t>(s.owned->data(), static_cast<size_t>(len));
  }
  return std::nullopt;
}

bool is_row_major(const Tensor& t) {
  if (t.strides.empty()) return true;  // strides unset: treated as row-major
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] == 0) return true;
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

}  // namespace

uint64_t checked_numel(const std::string& file, const std::string& name, const Tensor& t) {
  if (!t.strides.empty() && t.strides.size() != t.shape.size())
    throw Error(
        ErrorKind::Corrupt, file, tensor_where(name),
        expected_found(std::to_string(t.shape.size()) + " strides", std::to_string(t.strides.size())));
  for (const int64_t d : t.shape) {
    if (d < 0)
      throw Error(ErrorKind::Corrupt, file, tensor_where(name), "negative dimension " + std::to_string(d));
  }
  for (const int64_t d : t.shape)
    if (d == 0) return 0;
  uint64_t numel = 1;
  for (const int64_t d : t.shape) {
    const auto u = static_cast<uint64_t>(d);
    if (numel > static_cast<uint64_t>(INT64_MAX) / u)
      throw Error(ErrorKind::Corrupt, file, tensor_where(name), "the number of elements overflows");
    numel *= u;
  }
  if (numel > std::numeric_limits<uint64_t>::max() / element_size(t.dtype))
    throw Error(ErrorKind::Corrupt, file, tensor_where(name), "the number of bytes overflows");
  return numel;
}

std::optional<std::span<const uint8_t>> row_major_view(const std::string& file, const std::string& name,
                                                       const Tensor& t) {
  const uint64_t nbytes = checked_numel(file, name, t) * element_size(t.dtype);
  if (nbytes == 0) return std::span<const uint8_t>{};
  if (!t.storage) throw Error(ErrorKind::Corrupt, file, tensor_where(name), "has no storage");
  if (t.storage_offset < 0)
    throw Error(ErrorKind::Corrupt, file, tensor_where(name), "negative storage offset");
  const auto span = storage_span(*t.storage);
  if (!span || !is_row_major(t)) return std::nullopt;
  const uint64_t base = static_cast<uint64_t>(t.storage_offset) * element_size(t.dtype);
  if (base > span->size() || nbytes > span->size() - base)
    throw Error(ErrorKind::Corrupt, file, tensor_where(name),
                "needs bytes [" + std::to_string(base) + ", " + std::to_string(base + nbytes) +
                    ") of a storage holding " + std::to_string(span->size()));
  return span->subspan(static_cast<size_t>(base), static_cast<size_t>(nbytes));
}

void stream_row_major(const std::string& file, const std::string& name, const Tensor& t, ByteSink& sink) {
  const uint64_t numel = checked_numel(file, name, t);
  const uint64_t esize = element_size(t.dtype);
  const uint64_t nbytes = numel * esize;
  if (nbytes == 0) return;
  if (const auto view = row_major_view(file, name, t)) {
    if (t.storage
            ->file) {  // a file sink copies mapped bytes in the kernel; pages read here are dropped after
      const uint64_t offset = t.storage->file_offset + static_cast<uint64_t>(t.storage_offset) * esize;
      sink.write_file_range(*t.storage->file, offset, nbytes);
    } else {
      sink.write(*view);
    }
    return;
  }
  const auto span = storage_span(*t.storage);
  if (!span) {  // producer-only: it writes the whole storage, so the tensor must be exactly that storage
    if (!t.storage->producer) throw Error(file, tensor_where(name), "storage has no bytes and no producer");
    if (!is_row_major(t) || t.storage_offset != 0 || t.storage->nbytes() != nbytes)
      throw Error(file, tensor_where(name),
                  "a produced storage can only be written as one whole contiguous tensor");
    CountingSink counter(sink);
    try {
      t.storage->producer(counter);
    } catch (const Error& e) {
      throw e.with_file(file);
    }
    if (counter.position() != nbytes)
      throw Error(file, tensor_where(name),
                  "producer wrote the wrong number of bytes: " +
                      expected_found(std::to_string(nbytes), std::to_string(counter.position())));
    return;
  }

  // Strided: check the reachable range, then gather into one buffer.
  const size_t rank = t.shape.size();
  int64_t max_off = t.storage_offset, min_off = t.storage_offset;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t reach = (t.shape[i] - 1) * t.strides[i];
    if (reach > 0) {
      max_off += reach;
    } else {
      min_off += reach;
    }
  }
  if (min_off < 0 || static_cast<uint64_t>(max_off + 1) * esize > span->size())
    throw Error(ErrorKind::Corrupt, file, tensor_where(name),
                "strides reach outside a storage of " + std::to_string(span->size()) + " bytes");
  std::vector<uint8_t> buffer(static_cast<size_t>(nbytes));
  std::vector<int64_t> index(rank, 0);
  int64_t off = t.storage_offset;
  for (uint64_t k = 0; k < numel; ++k) {
    std::memcpy(buffer.data() + k * esize, span->data() + static_cast<uint64_t>(off) * esize, esize);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < t.shape[d]) {
        off += t.strides[d];
        break;
      }
      off -= (t.shape[d] - 1) * t.strides[d];
      index[d] = 0;
    }
  }
  sink.write(buffer);
}

}  // namespace ckptdoc::detail
