#pragma once
// Legends as rich text: core's session::Legend (title, swatches) for the layout map's shade and for the
// overview strip's three lanes, so every shaded picture says what its colours mean.
#include <QLabel>

#include "ckptdoc/session/shade_legend.h"

namespace ckptdoc::gui {

class Session;

// "<b>title</b>: ■ text ■ text ..."; the title alone when there are no swatches.
QString legendHtml(const session::Legend& legend);

// One line per strip lane, refreshed with the analysis.
class StripLegend : public QLabel {
  Q_OBJECT
 public:
  explicit StripLegend(Session* session, QWidget* parent = nullptr);

 private:
  void refresh();
  Session* session_;
};

}  // namespace ckptdoc::gui
