#pragma once
// Lazily converted tensors for exports: the result is a produced tensor that streams the source's
// elements in chunks, converting dtype on the way, so memory stays bounded by the chunk size.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ckptdoc/compute/backend.h"
#include "ckptdoc/format/value.h"
#include "ckptdoc/io/file_io.h"

namespace ckptdoc::deepspeed::detail {

// Converts `count` elements from `in` (dtype `from`) to dtype `to`, appended to `out`. Float dtypes
// (f32, f16, bf16, f64) and integer/bool sources are supported (ints go through float, as torch's .float()).
void convert_elements(std::span<const uint8_t> in, DType from, DType to, std::vector<uint8_t>& out);

// Streams a (sub-)tensor's elements in row-major order into `sink` as dtype `to`. Contiguous sources with
// the same dtype are written straight from the mapped file. float32 <-> float16/bfloat16 go through
// `backend`'s downcast/upcast when one is given (vectorised or on the GPU; bit-exact with the scalar path).
void write_as(const Tensor& src, DType to, ByteSink& sink, Backend* backend = nullptr);

// A produced tensor with `src`'s shape whose bytes are `src` converted to `to` when written.
Tensor lazily_converted(const Tensor& src, DType to, std::shared_ptr<Backend> backend = nullptr);

}  // namespace ckptdoc::deepspeed::detail
