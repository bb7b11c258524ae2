#pragma once
// The overview strip: every trainable param in layout order, one lane each for divergence (exact fraction),
// moment magnitude and NaN/Inf count, shaded like the layout map (core's session::param_strip), so the bad
// param among thousands shows before any is selected. Hover names the param; a click selects it everywhere.
#include <QWidget>

namespace ckptdoc::gui {

class Session;

class ParamStrip : public QWidget {
  Q_OBJECT
 public:
  explicit ParamStrip(Session* session, QWidget* parent = nullptr);
  void setSelectedParam(const QString& name);
  // The param drawn at x (widget coordinates), empty when none.
  QString paramAt(int x) const;
  // The colour of lane `lane` (0 divergence, 1 moments, 2 NaN/Inf) at x, for tests.
  QColor colourAt(int lane, int x) const;
  int stripLeft() const { return kLabelWidth; }

  QSize sizeHint() const override { return {800, kTop + 3 * (kLaneHeight + kGap) + 4}; }
  QSize minimumSizeHint() const override { return {200, sizeHint().height()}; }

 signals:
  void paramClicked(const QString& name);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  bool event(QEvent*) override;

 private:
  static constexpr int kLabelWidth = 82, kLaneHeight = 14, kGap = 3, kTop = 2;
  int stripWidth() const { return std::max(1, width() - kLabelWidth - 4); }
  Session* session_;
  QString selected_;
};

}  // namespace ckptdoc::gui
