// Tensor: a strided view on a storage; bounds checks, copies and float conversion.
#include <algorithm>
#include <cstring>

#include "ckptdoc/format/value.h"
#include "format/value_fail.h"

namespace ckptdoc {

using value_detail::fail;
using value_detail::mul_overflow;

int64_t Tensor::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("tensor has a negative size " + std::to_string(d));
    if (mul_overflow(n, static_cast<uint64_t>(d), &n) || n > static_cast<uint64_t>(INT64_MAX))
      fail("tensor element count overflows");
  }
  return static_cast<int64_t>(n);
}

bool Tensor::is_contiguous() const {
  if (strides.size() != shape.size()) return false;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

namespace {
// Checks the view fits the storage; returns the storage's byte span when available (empty span with
// *have=false for producer-only storages).
void check_view(const Tensor& t) {
  if (!t.storage) fail("tensor has no storage");
  if (t.strides.size() != t.shape.size())
    fail("tensor has " + std::to_string(t.shape.size()) + " sizes but " + std::to_string(t.strides.size()) +
         " strides");
  if (t.storage_offset < 0) fail("tensor has a negative storage offset");
  const int64_t n = t.numel();
  if (n == 0) return;
  uint64_t extent = static_cast<uint64_t>(t.storage_offset);
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.strides[i] < 0) fail("tensor has a negative stride");
    uint64_t span = 0;
    if (mul_overflow(static_cast<uint64_t>(t.shape[i] - 1), static_cast<uint64_t>(t.strides[i]), &span) ||
        __builtin_add_overflow(extent, span, &extent))
      fail("tensor view extent overflows");
  }
  if (extent >= t.storage->numel)
    fail("tensor view reaches element " + std::to_string(extent) + " of a storage with " +
         std::to_string(t.storage->numel) + " elements");
}

std::vector<uint8_t> materialize(const Storage& s) {
  VectorSink sink;
  s.write_to(sink);
  return std::move(sink.data);
}
}  // namespace

std::span<const uint8_t> Tensor::contiguous_bytes() const {
  if (!is_contiguous()) fail("tensor is not contiguous");
  check_view(*this);
  if (element_size(storage->dtype) != element_size(dtype))
    fail("tensor dtype " + std::string(dtype_name(dtype)) + " does not match storage dtype " +
         std::string(dtype_name(storage->dtype)));
  const auto all = storage->bytes();
  const uint64_t es = element_size(dtype);
  const uint64_t off = static_cast<uint64_t>(storage_offset) * es;
  const uint64_t n = nbytes();
  if (n == 0) return {};
  if (off > all.size() || n > all.size() - off) fail("tensor bytes lie outside the storage");
  return all.subspan(static_cast<size_t>(off), static_cast<size_t>(n));
}

void Tensor::copy_to(std::span<uint8_t> out) const {
  check_view(*this);
  const uint64_t total = nbytes();
  if (out.size() != total)
    fail("copy_to: " +
         expected_found(std::to_string(total) + " bytes", std::to_string(out.size()) + " bytes"));
  if (total == 0) return;
  std::vector<uint8_t> held;
  std::span<const uint8_t> src;
  if (storage->has_bytes()) {
    src = storage->bytes();
  } else {
    held = materialize(*storage);
    src = held;
  }
  const size_t es = element_size(dtype);
  if (element_size(storage->dtype) != es) fail("tensor dtype does not match its storage dtype");
  if (is_contiguous()) {
    std::memcpy(out.data(), src.data() + static_cast<size_t>(storage_offset) * es,
                static_cast<size_t>(total));
    return;
  }
  const size_t nd = shape.size();
  std::vector<int64_t> idx(nd, 0);
  // Innermost run: contiguous when its stride is 1.
  const int64_t inner = nd ? shape[nd - 1] : 1;
  const int64_t inner_stride = nd ? strides[nd - 1] : 1;
  size_t pos = 0;
  while (true) {
    int64_t base = storage_offset;
    for (size_t i = 0; i + 1 < nd; ++i) base += idx[i] * strides[i];
    if (inner_stride == 1) {
      std::memcpy(out.data() + pos, src.data() + static_cast<size_t>(base) * es,
                  static_cast<size_t>(inner) * es);
      pos += static_cast<size_t>(inner) * es;
    } else {
      for (int64_t j = 0; j < inner; ++j) {
        std::memcpy(out.data() + pos, src.data() + static_cast<size_t>(base + j * inner_stride) * es, es);
        pos += es;
      }
    }
    if (nd <= 1) break;
    size_t d = nd - 1;
    bool done = true;
    while (d-- > 0) {
      if (++idx[d] < shape[d]) {
        done = false;
        break;
      }
      idx[d] = 0;
    }
    if (done) break;
  }
}

std::vector<uint8_t> Tensor::to_bytes() const {
  std::vector<uint8_t> out(static_cast<size_t>(nbytes()));
  copy_to(out);
  return out;
}

void Tensor::check_unchanged() const {
  if (storage && storage->file) storage->file->check_unchanged();
}

std::vector<float> Tensor::to_float() const {
  const auto b = to_bytes();
  const size_t n = static_cast<size_t>(numel());
  std::vector<float> out(n);
  auto load = [&](auto tag, size_t i) {
    decltype(tag) v;
    std::memcpy(&v, b.data() + i * sizeof(v), sizeof(v));
    return v;
  };
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::F32:
        out[i] = load(float{}, i);
        break;
      case DType::F16:
        out[i] = half_to_float(load(uint16_t{}, i));
        break;
      case DType::BF16:
        out[i] = bf16_to_float(load(uint16_t{}, i));
        break;
      case DType::F64:
        out[i] = static_cast<float>(load(double{}, i));
        break;
      case DType::I64:
        out[i] = static_cast<float>(load(int64_t{}, i));
        break;
      case DType::I32:
        out[i] = static_cast<float>(load(int32_t{}, i));
        break;
      case DType::I16:
        out[i] = static_cast<float>(load(int16_t{}, i));
        break;
      case DType::I8:
        out[i] = static_cast<float>(load(int8_t{}, i));
        break;
      case DType::U8:
        out[i] = static_cast<float>(load(uint8_t{}, i));
        break;
      case DType::Bool:
        out[i] = b[i] ? 1.0f : 0.0f;
        break;
      case DType::C64:
      case DType::C128:
        fail("to_float: complex tensors have no float32 conversion");
    }
  }
  return out;
}

std::vector<int64_t> Tensor::contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return s;
}

Tensor Tensor::from_bytes(DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.strides = contiguous_strides(t.shape);
  if (bytes.size() != t.nbytes())
    fail("tensor bytes: " + expected_found(std::to_string(t.nbytes()), std::to_string(bytes.size())));
  t.storage = Storage::from_bytes(dtype, std::move(bytes));
  return t;
}

Tensor Tensor::produced(DType dtype, std::vector<int64_t> shape, std::function<void(ByteSink&)> producer) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.strides = contiguous_strides(t.shape);
  auto s = std::make_shared<Storage>();
  s->dtype = dtype;
  s->numel = static_cast<uint64_t>(t.numel());
  s->producer = std::move(producer);
  t.storage = std::move(s);
  return t;
}

}  // namespace ckptdoc
