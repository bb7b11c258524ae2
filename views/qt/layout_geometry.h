#pragma once
// The pure mapping behind the partition layout view: which pixel shows which rank and which element of its
// flat partition, and which fragment (param slice) lives there. No painting and no Qt widgets, so tests
// can check it directly and the widget draws only the visible part.
#include <QPointF>
#include <cstdint>
#include <optional>

#include "ckptdoc/deepspeed/catalog.h"

namespace ckptdoc::gui {

struct LayoutGeometry {
  int label_width = 72;     // rank labels on the left
  int header_height = 24;   // element ruler on top
  int row_height = 18;
  int row_gap = 3;
  int rank_count = 0;
  int64_t partition_numel = 0;
  double first_element = 0;       // element drawn at x = label_width (pan)
  double elements_per_pixel = 1;  // zoom
  double scroll_y = 0;            // pixels of rows scrolled off the top

  double xOf(double element) const { return label_width + (element - first_element) / elements_per_pixel; }
  double elementAt(double x) const { return first_element + (x - label_width) * elements_per_pixel; }
  double rowTop(int rank) const { return header_height + rank * (row_height + row_gap) - scroll_y; }
  // The rank whose row contains y (gaps between rows belong to none).
  std::optional<int> rankAt(double y) const;
  // First and one-past-last rank with any pixel inside a view `height` pixels tall.
  std::pair<int, int> visibleRanks(double height) const;
  double contentHeight() const { return header_height + rank_count * (row_height + row_gap); }
  // Zooms so the whole partition fits `width` pixels.
  void fit(double width);
  // Zoom by `factor` (>1 zooms in) keeping the element under x fixed.
  void zoomAt(double x, double factor);
  void clamp(double width, double height);
};

struct LayoutHit {
  int rank = 0;
  int fragment = -1;     // index into that rank's RankPartition::fragments; -1 for padding
  int param = -1;        // GroupLayout::params index, -1 for padding
  int64_t element = 0;   // element of the rank's partition under the pixel
};

// Maps a pixel to (rank, fragment) in `group`; nullopt outside any row or past the partition's end.
std::optional<LayoutHit> hitTest(const deepspeed::GroupLayout& group, const LayoutGeometry& geometry, QPointF pixel);

// Index of the first fragment of `partition` that ends after `element` (binary search; fragments are sorted
// by partition_offset). Returns fragments.size() when none.
size_t firstFragmentEndingAfter(const deepspeed::RankPartition& partition, int64_t element);

}  // namespace ckptdoc::gui
