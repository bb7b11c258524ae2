#include "sources/checkpoint/merged_param.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "ckptdoc/error.h"
#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/io/mapped_file.h"
#include "format/tensor_pages.h"

namespace ckptdoc::universal::detail {
namespace {

constexpr int64_t kChunk = int64_t{1} << 20;  // elements

int64_t product(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < s.size(); ++i) n *= s[i];
  return n;
}

// Calls emit(k, offset, count) for the merged flat order of p's elements, up to p.out_numel, as runs of
// tensor rank k's slice; adjacent runs of one slice are joined.
void for_each_segment(const MergedParam& p, const std::function<void(size_t, int64_t, int64_t)>& emit) {
  int64_t left = p.out_numel;
  size_t pk = 0;
  int64_t poff = 0, pn = 0;
  auto add = [&](size_t k, int64_t off, int64_t n) {
    n = std::min(n, left);
    if (n <= 0) return false;
    left -= n;
    if (pn > 0 && k == pk && off == poff + pn) {
      pn += n;
    } else {
      if (pn > 0) emit(pk, poff, pn);
      pk = k, poff = off, pn = n;
    }
    return left > 0;
  };
  const auto& parts = p.parts;
  [&] {  // returns once out_numel elements are placed
    if (p.merge.kind == MergeKind::Replicated || parts.size() == 1) {
      add(0, 0, parts[0].numel);
    } else if (p.merge.kind == MergeKind::TwoSubParams) {
      for (int64_t h = 0; h < 2; ++h)
        for (size_t k = 0; k < parts.size(); ++k)
          if (!add(k, h * parts[k].numel / 2, parts[k].numel / 2)) return;
    } else {  // CatDim
      const auto d = static_cast<size_t>(p.merge.cat_dim);
      const int64_t outer = product(parts[0].shape, 0, d);
      for (int64_t o = 0; o < outer; ++o)
        for (size_t k = 0; k < parts.size(); ++k) {
          const int64_t block = product(parts[k].shape, d, parts[k].shape.size());
          if (!add(k, o * block, block)) return;
        }
    }
  }();
  if (pn > 0) emit(pk, poff, pn);
}

// Calls fn(run, offset into the run, count) for elements [first, first + n) of a slice.
template <class Fn>
void for_each_run(const SlicePart& s, int64_t first, int64_t n, Fn fn) {
  for (const Run& r : s.runs) {
    if (n <= 0) return;
    if (r.param_offset + r.numel <= first) continue;
    const int64_t in = first - r.param_offset;
    const int64_t take = std::min(n, r.numel - in);
    fn(r, in, take);
    first += take;
    n -= take;
  }
  if (n > 0) throw Error("", "", "a param's fragments do not cover it (layout error)");
}

}  // namespace

std::string MergedParam::plan() {
  const auto& first = parts.front().shape;
  std::vector<int64_t> shape = first;
  const bool concat = merge.kind == MergeKind::CatDim || merge.kind == MergeKind::TwoSubParams;
  const auto d = static_cast<size_t>(merge.kind == MergeKind::TwoSubParams ? 0 : merge.cat_dim);
  for (const auto& s : parts) {
    if (!concat) {
      if (s.shape != first)
        return "its tensor-parallel slices " + shape_text(first) + " and " + shape_text(s.shape) +
               " differ, but it is " + (merge.kind == MergeKind::Average ? "averaged" : "replicated");
      continue;
    }
    std::vector<int64_t> a = s.shape, b = first;
    if (a.size() <= d) return "it is concatenated on dim " + std::to_string(d) + " but is " + shape_text(a);
    a[d] = b[d] = 0;
    if (a != b)
      return "its tensor-parallel slices " + shape_text(first) + " and " + shape_text(s.shape) +
             " do not concatenate on dim " + std::to_string(d);
    if (merge.kind == MergeKind::TwoSubParams && s.shape[0] % 2 != 0)
      return "two sub-params per slice need an even dim 0, found " + shape_text(s.shape);
  }
  if (concat && parts.size() > 1) {
    shape[d] = 0;
    for (const auto& s : parts) shape[d] += s.shape[d];
  }
  if (merge.vocab) {
    if (shape.size() != 2) return "a vocabulary param, but not 2-D: " + shape_text(shape);
    shape[0] = std::min(shape[0], merge.vocab_rows);
  }
  out_shape = shape;
  out_numel = product(shape, 0, shape.size());
  return "";
}

void MergedParam::fill_part(size_t k, size_t state, int64_t first, int64_t n, float* out) const {
  const SlicePart& s = parts[k];
  for_each_run(s, first, n, [&](const Run& r, int64_t in, int64_t take) {
    const auto g = static_cast<size_t>(s.group), rank = static_cast<size_t>(r.rank);
    std::memcpy(out, s.partitions->data[g][rank][state] + r.partition_offset + in,
                static_cast<size_t>(take) * sizeof(float));
    release_pages(s.partitions->keep[g][rank][state], r.partition_offset + in, take);
    out += take;
  });
}

void MergedParam::fill(size_t state, int64_t first, int64_t n, float* out) const {
  if (merge.kind == MergeKind::Average) {
    std::vector<float> slice(static_cast<size_t>(n));
    fill_part(0, state, first, n, out);
    for (int64_t i = 0; i < n; ++i) out[i] = 0.0f + out[i];  // sum() starts from the integer 0
    for (size_t k = 1; k < parts.size(); ++k) {
      fill_part(k, state, first, n, slice.data());
      for (int64_t i = 0; i < n; ++i) out[i] += slice[static_cast<size_t>(i)];
    }
    if (parts.size() > 1)
      for (int64_t i = 0; i < n; ++i) out[i] /= static_cast<float>(parts.size());
    return;
  }
  int64_t at = 0;  // merged position of the segment
  for_each_segment(*this, [&](size_t k, int64_t off, int64_t count) {
    const int64_t lo = std::max(at, first), hi = std::min(at + count, first + n);
    if (lo < hi) fill_part(k, state, off + (lo - at), hi - lo, out + (lo - first));
    at += count;
  });
}

void MergedParam::write(size_t state, ByteSink& sink, const std::function<void()>& check) const {
  if (merge.kind == MergeKind::Average) {
    std::vector<float> buf(static_cast<size_t>(std::min(kChunk, out_numel)));
    for (int64_t first = 0; first < out_numel; first += kChunk) {
      check();
      const int64_t n = std::min(kChunk, out_numel - first);
      fill(state, first, n, buf.data());
      sink.write({reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(n) * sizeof(float)});
    }
    return;
  }
  for_each_segment(*this, [&](size_t k, int64_t off, int64_t count) {
    const SlicePart& s = parts[k];
    for_each_run(s, off, count, [&](const Run& r, int64_t in, int64_t take) {
      const auto g = static_cast<size_t>(s.group), rank = static_cast<size_t>(r.rank);
      const Tensor& whole = s.partitions->keep[g][rank][state];
      const float* src = s.partitions->data[g][rank][state] + r.partition_offset + in;
      // A mapped partition goes to the sink as file ranges (the kernel copies them, the CRC is read beside),
      // 16 MiB at a time so that cancelling and progress stay responsive.
      const MappedFile* file = whole.storage ? whole.storage->file.get() : nullptr;
      const int64_t step = file ? kChunk * 4 : kChunk;
      for (int64_t done = 0; done < take; done += step) {
        check();
        const int64_t m = std::min(step, take - done);
        const auto* bytes = reinterpret_cast<const uint8_t*>(src + done);
        const auto len = static_cast<uint64_t>(m) * sizeof(float);
        if (file && len >= (uint64_t{1} << 20))  // small ones are cheaper through the sink's buffer
          sink.write_file_range(*file, static_cast<uint64_t>(bytes - file->bytes().data()), len);
        else
          sink.write({bytes, static_cast<size_t>(len)});
        release_pages(whole, r.partition_offset + in + done, m);
      }
    });
  });
}

}  // namespace ckptdoc::universal::detail
