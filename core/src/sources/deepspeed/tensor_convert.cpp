#include "sources/deepspeed/tensor_convert.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "ckptdoc/error.h"

namespace ckptdoc::deepspeed::detail {
namespace {

constexpr int64_t kChunkElements = 1 << 20;

float load_float(const uint8_t* p, DType t) {
  switch (t) {
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return half_to_float(h);
    }
    case DType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_to_float(h);
    }
    case DType::F64: {
      double d;
      std::memcpy(&d, p, 8);
      return static_cast<float>(d);
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<float>(v);
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<float>(v);
    }
    case DType::I16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<float>(v);
    }
    case DType::I8:
      return static_cast<float>(static_cast<int8_t>(*p));
    case DType::U8:
    case DType::Bool:
      return static_cast<float>(*p);
    default:
      throw Error(ErrorKind::Unsupported, "", "",
                  "cannot convert " + std::string(dtype_name(t)) + " elements");
  }
}

void store_float(float f, DType t, std::vector<uint8_t>& out) {
  switch (t) {
    case DType::F32: {
      uint8_t b[4];
      std::memcpy(b, &f, 4);
      out.insert(out.end(), b, b + 4);
      return;
    }
    case DType::F16: {
      const uint16_t h = float_to_half(f);
      out.push_back(static_cast<uint8_t>(h & 0xff));
      out.push_back(static_cast<uint8_t>(h >> 8));
      return;
    }
    case DType::BF16: {
      const uint16_t h = float_to_bf16(f);
      out.push_back(static_cast<uint8_t>(h & 0xff));
      out.push_back(static_cast<uint8_t>(h >> 8));
      return;
    }
    default:
      throw Error(ErrorKind::Unsupported, "", "", "cannot export to " + std::string(dtype_name(t)));
  }
}

}  // namespace

void convert_elements(std::span<const uint8_t> in, DType from, DType to, std::vector<uint8_t>& out) {
  if (from == to) {
    out.insert(out.end(), in.begin(), in.end());
    return;
  }
  const size_t es = element_size(from);
  out.reserve(out.size() + in.size() / es * element_size(to));
  for (size_t i = 0; i + es <= in.size(); i += es) store_float(load_float(in.data() + i, from), to, out);
}

namespace {

bool lp(DType t) {
  return t == DType::F16 || t == DType::BF16;
}

// `in` converted to `to` into `out` (replaced), on the backend where it has the conversion.
void convert_chunk(std::span<const uint8_t> in, DType from, DType to, std::vector<uint8_t>& out,
                   Backend* backend) {
  if (backend && from == DType::F32 && lp(to)) {
    const size_t n = in.size() / 4;
    out.resize(n * 2);
    // Legacy torch files are mapped where their storages fall: a misaligned chunk (at most kChunkElements) is
    // read through a copy, as downcast takes floats.
    std::vector<float> aligned;
    if (reinterpret_cast<uintptr_t>(in.data()) % alignof(float) != 0) {
      aligned.resize(n);
      std::memcpy(aligned.data(), in.data(), n * sizeof(float));
    }
    backend->downcast(aligned.empty() ? reinterpret_cast<const float*>(in.data()) : aligned.data(), to,
                      out.data(), n);
  } else if (backend && lp(from) && to == DType::F32) {
    const size_t n = in.size() / 2;
    out.resize(n * 4);
    backend->upcast(in.data(), from, reinterpret_cast<float*>(out.data()), n);
  } else {
    out.clear();
    convert_elements(in, from, to, out);
  }
}

}  // namespace

void write_as(const Tensor& src, DType to, ByteSink& sink, Backend* backend) {
  const int64_t n = src.numel();
  if (n == 0) return;
  const bool flat = src.is_contiguous() && src.storage && src.storage->has_bytes();
  if (!flat) {  // strided or producer-backed: materialise this one tensor
    const auto bytes = src.to_bytes();
    std::vector<uint8_t> out;
    convert_chunk(bytes, src.dtype, to, out, backend);
    sink.write(out);
    return;
  }
  const auto all = src.contiguous_bytes();
  const size_t es = element_size(src.dtype);
  const auto& file = src.storage->file;
  if (file && src.dtype == to) {  // unchanged bytes: the sink may copy them inside the kernel
    sink.write_file_range(*file, static_cast<uint64_t>(all.data() - file->bytes().data()), all.size());
    return;
  }
  std::vector<uint8_t> buf;
  for (int64_t i = 0; i < n; i += kChunkElements) {
    const int64_t m = std::min(kChunkElements, n - i);
    const auto chunk = all.subspan(static_cast<size_t>(i) * es, static_cast<size_t>(m) * es);
    if (src.dtype == to) {
      sink.write(chunk);
    } else {
      convert_chunk(chunk, src.dtype, to, buf, backend);
      sink.write(buf);
    }
    if (file) {  // done with these pages: keep the resident set near one chunk
      const uint64_t off = static_cast<uint64_t>(chunk.data() - file->bytes().data());
      file->dont_need(off, chunk.size());
    }
  }
}

Tensor lazily_converted(const Tensor& src, DType to, std::shared_ptr<Backend> backend) {
  return Tensor::produced(to, src.shape, [src, to, backend = std::move(backend)](ByteSink& sink) {
    write_as(src, to, sink, backend.get());
  });
}

}  // namespace ckptdoc::deepspeed::detail
