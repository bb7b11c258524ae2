#pragma once
// The pure mapping behind both views' partition layout maps: which pixel shows which rank and which element
// of its flat partition, and which fragment (param slice) lives there. Rows shrink to a fraction of a pixel
// so 1024 ranks fit one screen (several ranks then share a pixel row). No painting, so tests check it
// directly.
#include <cstdint>
#include <optional>
#include <utility>

#include "ckptdoc/model/flat_layout.h"

namespace ckptdoc::session {

struct LayoutGeometry {
  double label_width = 72;    // rank labels on the left
  double header_height = 24;  // element ruler on top
  double row_height = 18;     // may be below one pixel when thousands of ranks share the view
  double row_gap = 3;
  int rank_count = 0;
  int64_t partition_numel = 0;
  double first_element = 0;       // element drawn at x = label_width (pan)
  double elements_per_pixel = 1;  // zoom
  double scroll_y = 0;            // pixels of rows scrolled off the top

  double pitch() const { return row_height + row_gap; }
  double x_of(double element) const { return label_width + (element - first_element) / elements_per_pixel; }
  double element_at(double x) const { return first_element + (x - label_width) * elements_per_pixel; }
  double row_top(int rank) const { return header_height + rank * pitch() - scroll_y; }
  // The rank whose row contains y (gaps between rows belong to none); with rows under a pixel, the first
  // rank drawn in that pixel row.
  std::optional<int> rank_at(double y) const;
  // First and one-past-last rank with any pixel inside a view `height` pixels tall.
  std::pair<int, int> visible_ranks(double height) const;
  double content_height() const { return header_height + rank_count * pitch(); }
  // Zooms so the whole partition fits `width` pixels.
  void fit(double width);
  // Row height and gap so every rank fits `height` pixels: roomy rows (up to max_row) for a few ranks, thin
  // gapless ones (below a pixel) for thousands.
  void fit_rows(double height, double max_row = 36);
  // Zoom by `factor` (>1 zooms in) keeping the element under x fixed.
  void zoom_at(double x, double factor);
  // Row zoom by `factor` keeping the rank under y fixed.
  void zoom_rows_at(double y, double factor);
  void clamp(double width, double height);
};

struct LayoutHit {
  int rank = 0;         // index into GroupLayout::partitions
  int fragment = -1;    // index into that rank's RankPartition::fragments; -1 for padding
  int param = -1;       // GroupLayout::params index, -1 for padding
  int64_t element = 0;  // element of the rank's partition under the pixel
};

// Maps a pixel to (rank, fragment) in `group`; nullopt outside any row or past the partition's end.
std::optional<LayoutHit> hit_test(const model::GroupLayout& group, const LayoutGeometry& geometry, double x,
                                  double y);

// Index of the first fragment of `partition` that ends after `element` (binary search; fragments are sorted
// by partition_offset); fragments.size() when none.
size_t first_fragment_ending_after(const model::RankPartition& partition, int64_t element);

}  // namespace ckptdoc::session
