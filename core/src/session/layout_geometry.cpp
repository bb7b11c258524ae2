#include "ckptdoc/session/layout_geometry.h"

#include <algorithm>
#include <cmath>

namespace ckptdoc::session {

std::optional<int> LayoutGeometry::rank_at(double y) const {
  const double rel = y - header_height + scroll_y;
  if (rel < 0 || pitch() <= 0) return std::nullopt;
  const int rank = static_cast<int>(std::floor(rel / pitch()));
  if (rank >= rank_count) return std::nullopt;
  if (rel - rank * pitch() >= row_height && pitch() >= 1) return std::nullopt;
  return rank;
}

std::pair<int, int> LayoutGeometry::visible_ranks(double height) const {
  if (pitch() <= 0) return {0, 0};
  const int first = std::max(0, static_cast<int>(std::floor(scroll_y / pitch())));
  const int last =
      std::min(rank_count, static_cast<int>(std::ceil((scroll_y + height - header_height) / pitch())) + 1);
  return {std::min(first, rank_count), std::max(std::min(first, rank_count), last)};
}

void LayoutGeometry::fit(double width) {
  const double avail = std::max(1.0, width - label_width - 8);
  elements_per_pixel = std::max(1e-3, static_cast<double>(std::max<int64_t>(partition_numel, 1)) / avail);
  first_element = 0;
}

void LayoutGeometry::fit_rows(double height, double max_row) {
  const double avail = std::max(1.0, height - header_height - 4);
  const double p = avail / std::max(1, rank_count);
  if (p >= 17) {
    row_gap = 3;
    row_height = std::clamp(p - row_gap, 14.0, max_row);
  } else if (p >= 4) {
    row_gap = 1;
    row_height = p - row_gap;
  } else {  // thousands of ranks: gapless rows, down to a fraction of a pixel
    row_gap = 0;
    row_height = p;
  }
  scroll_y = 0;
}

void LayoutGeometry::zoom_at(double x, double factor) {
  const double anchor = element_at(x);
  elements_per_pixel = std::clamp(elements_per_pixel / factor, 1.0 / 64.0, 1e15);
  first_element = anchor - (x - label_width) * elements_per_pixel;
}

void LayoutGeometry::zoom_rows_at(double y, double factor) {
  const double anchor = (y - header_height + scroll_y) / pitch();  // rank (fractional) under y
  const double h = std::clamp(row_height * factor, 0.05, 64.0);
  row_gap = h >= 14 ? 3 : h >= 4 ? 1 : 0;
  row_height = h;
  scroll_y = anchor * pitch() - (y - header_height);
}

void LayoutGeometry::clamp(double width, double height) {
  const double visible = std::max(1.0, width - label_width) * elements_per_pixel;
  const double max_first = std::max(0.0, static_cast<double>(partition_numel) - visible * 0.5);
  first_element = std::clamp(first_element, -visible * 0.5, max_first);
  const double max_scroll = std::max(0.0, content_height() - height);
  scroll_y = std::clamp(scroll_y, 0.0, max_scroll);
}

size_t first_fragment_ending_after(const model::RankPartition& partition, int64_t element) {
  const auto& f = partition.fragments;
  auto it = std::partition_point(f.begin(), f.end(), [element](const model::Fragment& fr) {
    return fr.partition_offset + fr.numel <= element;
  });
  return static_cast<size_t>(it - f.begin());
}

std::optional<LayoutHit> hit_test(const model::GroupLayout& group, const LayoutGeometry& g, double x,
                                  double y) {
  if (x < g.label_width) return std::nullopt;
  const auto rank = g.rank_at(y);
  if (!rank || *rank >= static_cast<int>(group.partitions.size())) return std::nullopt;
  const double e = g.element_at(x);
  if (e < 0 || e >= static_cast<double>(group.partition_numel)) return std::nullopt;
  const auto element = static_cast<int64_t>(std::floor(e));
  const auto& part = group.partitions[static_cast<size_t>(*rank)];
  LayoutHit hit;
  hit.rank = *rank;
  hit.element = element;
  const size_t i = first_fragment_ending_after(part, element);
  if (i < part.fragments.size() && part.fragments[i].partition_offset <= element) {
    hit.fragment = static_cast<int>(i);
    hit.param = part.fragments[i].param;
  }
  return hit;
}

}  // namespace ckptdoc::session
