#pragma once
// The Qt spelling of core's layout geometry (ckptdoc/session/layout_geometry.h): pixel <-> (rank, element,
// fragment) for the map widget and its tests.
#include <QPointF>
#include <optional>

#include "ckptdoc/session/layout_geometry.h"

namespace ckptdoc::gui {

using LayoutGeometry = session::LayoutGeometry;
using LayoutHit = session::LayoutHit;

inline std::optional<LayoutHit> hitTest(const model::GroupLayout& group, const LayoutGeometry& geometry,
                                        QPointF pixel) {
  return session::hit_test(group, geometry, pixel.x(), pixel.y());
}

}  // namespace ckptdoc::gui
