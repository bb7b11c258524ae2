#include "layout_geometry.h"

#include <algorithm>
#include <cmath>

namespace ckptdoc::gui {

std::optional<int> LayoutGeometry::rankAt(double y) const {
  const double rel = y - header_height + scroll_y;
  if (rel < 0) return std::nullopt;
  const double pitch = row_height + row_gap;
  const int rank = static_cast<int>(std::floor(rel / pitch));
  if (rank >= rank_count) return std::nullopt;
  if (rel - rank * pitch >= row_height) return std::nullopt;
  return rank;
}

std::pair<int, int> LayoutGeometry::visibleRanks(double height) const {
  const double pitch = row_height + row_gap;
  const int first = std::max(0, static_cast<int>(std::floor(scroll_y / pitch)));
  const int last = std::min(rank_count, static_cast<int>(std::ceil((scroll_y + height - header_height) / pitch)) + 1);
  return {std::min(first, rank_count), std::max(std::min(first, rank_count), last)};
}

void LayoutGeometry::fit(double width) {
  const double avail = std::max(1.0, width - label_width - 8);
  elements_per_pixel = std::max(1e-3, static_cast<double>(std::max<int64_t>(partition_numel, 1)) / avail);
  first_element = 0;
}

void LayoutGeometry::zoomAt(double x, double factor) {
  const double anchor = elementAt(x);
  elements_per_pixel = std::clamp(elements_per_pixel / factor, 1.0 / 64.0, 1e15);
  first_element = anchor - (x - label_width) * elements_per_pixel;
}

void LayoutGeometry::clamp(double width, double height) {
  const double visible = std::max(1.0, width - label_width) * elements_per_pixel;
  const double maxFirst = std::max(0.0, static_cast<double>(partition_numel) - visible * 0.5);
  first_element = std::clamp(first_element, -visible * 0.5, maxFirst);
  const double maxScroll = std::max(0.0, contentHeight() - height);
  scroll_y = std::clamp(scroll_y, 0.0, maxScroll);
}

size_t firstFragmentEndingAfter(const deepspeed::RankPartition& partition, int64_t element) {
  const auto& f = partition.fragments;
  auto it = std::partition_point(f.begin(), f.end(), [element](const deepspeed::Fragment& fr) {
    return fr.partition_offset + fr.numel <= element;
  });
  return static_cast<size_t>(it - f.begin());
}

std::optional<LayoutHit> hitTest(const deepspeed::GroupLayout& group, const LayoutGeometry& g, QPointF pixel) {
  if (pixel.x() < g.label_width) return std::nullopt;
  const auto rank = g.rankAt(pixel.y());
  if (!rank || *rank >= static_cast<int>(group.partitions.size())) return std::nullopt;
  const double e = g.elementAt(pixel.x());
  if (e < 0 || e >= static_cast<double>(group.partition_numel)) return std::nullopt;
  const auto element = static_cast<int64_t>(std::floor(e));
  const auto& part = group.partitions[static_cast<size_t>(*rank)];
  LayoutHit hit;
  hit.rank = *rank;
  hit.element = element;
  const size_t i = firstFragmentEndingAfter(part, element);
  if (i < part.fragments.size() && part.fragments[i].partition_offset <= element) {
    hit.fragment = static_cast<int>(i);
    hit.param = part.fragments[i].param;
  }
  return hit;
}

}  // namespace ckptdoc::gui
