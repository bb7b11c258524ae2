// Do a tensor's chunks tile its global shape? Each box must lie inside the shape, no two may overlap, and
// (then) their volumes must add up to the tensor's: what is left over is a gap no rank saved.
#include <algorithm>
#include <numeric>

#include "ckptdoc/format/shape_text.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/dcp/diagnose.h"

namespace ckptdoc::dcp {
namespace {

std::string box_text(const Chunk& c) {
  std::string s = "[";
  for (size_t d = 0; d < c.offsets.size(); ++d)
    s += (d ? ", " : "") + std::to_string(c.offsets[d]) + ":" + std::to_string(c.offsets[d] + c.sizes[d]);
  return s + "]";
}

bool overlap(const Chunk& a, const Chunk& b) {
  for (size_t d = 0; d < a.offsets.size(); ++d)
    if (a.offsets[d] >= b.offsets[d] + b.sizes[d] || b.offsets[d] >= a.offsets[d] + a.sizes[d]) return false;
  // Empty boxes hold nothing and overlap nothing.
  return a.numel() > 0 && b.numel() > 0;
}

}  // namespace

std::vector<Problem> tiling_problems(const Entry& entry) {
  std::vector<Problem> out;
  if (entry.kind != EntryKind::Tensor) return out;
  auto file_of = [](const Chunk& c) { return c.item ? c.item->file : std::string(); };
  std::vector<const Chunk*> inside;
  for (const auto& c : entry.chunks) {
    bool ok = true;
    for (size_t d = 0; d < c.offsets.size(); ++d)
      if (c.offsets[d] > entry.size[d] || c.sizes[d] > entry.size[d] - c.offsets[d]) ok = false;
    if (!ok) {
      out.push_back(problem(model::Code::DcpChunkOutside,
                            "'" + entry.key + "': chunk " + box_text(c) +
                                " lies outside the tensor's shape " + shape_text(entry.size),
                            file_of(c), entry.key));
      continue;
    }
    inside.push_back(&c);
  }
  // Sweep along dim 0 (FSDP2 and most planners cut there): only boxes whose dim-0 ranges meet are compared.
  std::sort(inside.begin(), inside.end(),
            [](const Chunk* a, const Chunk* b) { return a->offsets < b->offsets; });
  bool overlapping = false;
  for (size_t i = 0; i < inside.size() && !overlapping; ++i)
    for (size_t j = i + 1; j < inside.size(); ++j) {
      const Chunk& a = *inside[i];
      const Chunk& b = *inside[j];
      if (!a.offsets.empty() && b.offsets[0] >= a.offsets[0] + a.sizes[0]) break;
      if (overlap(a, b)) {
        out.push_back(problem(model::Code::DcpChunkOverlap,
                              "'" + entry.key + "': chunks " + box_text(a) + " (" + file_of(a) + ") and " +
                                  box_text(b) + " (" + file_of(b) + ") overlap",
                              file_of(b), entry.key));
        overlapping = true;
        break;
      }
    }
  if (overlapping) return out;
  int64_t covered = 0;
  for (const Chunk* c : inside) covered += c->numel();
  const int64_t total = entry.numel();
  if (covered < total)
    out.push_back(problem(model::Code::DcpChunkGap,
                          "'" + entry.key + "': chunks cover " + std::to_string(covered) + " of its " +
                              std::to_string(total) + " elements (shape " + shape_text(entry.size) + ", " +
                              std::to_string(entry.chunks.size()) + " chunk" +
                              (entry.chunks.size() == 1 ? "" : "s") +
                              "): " + std::to_string(total - covered) + " elements were saved by no rank",
                          "", entry.key));
  return out;
}

}  // namespace ckptdoc::dcp
