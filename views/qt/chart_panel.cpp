#include "chart_panel.h"

#include <QContextMenuEvent>
#include <QFileDialog>
#include <QMenu>
#include <QPainter>
#include <QRegularExpression>
#include <QSvgGenerator>

namespace ckptdoc::gui {

ChartPanel::ChartPanel(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  setMinimumSize(260, 200);
}

void ChartPanel::setChartOwned(QChart* chart) {
  QChart* old = this->chart();
  setChart(chart);
  delete old;
}

bool ChartPanel::exportTo(const QString& path) {
  if (path.endsWith(QStringLiteral(".svg"), Qt::CaseInsensitive)) {
    QSvgGenerator gen;
    gen.setFileName(path);
    gen.setSize(size());
    gen.setViewBox(rect());
    gen.setTitle(chart() ? chart()->title() : QString());
    gen.setDescription(QStringLiteral("ckptdoc chart"));
    QPainter p;
    if (!p.begin(&gen)) return false;
    render(&p);
    return p.end();
  }
  return grab().save(path);
}

void ChartPanel::contextMenuEvent(QContextMenuEvent* e) {
  QMenu menu(this);
  auto* png = menu.addAction(tr("Export as PNG…"));
  auto* svg = menu.addAction(tr("Export as SVG…"));
  auto* chosen = menu.exec(e->globalPos());
  if (!chosen) return;
  const bool asSvg = chosen == svg;
  const QString base = chart() && !chart()->title().isEmpty() ? chart()->title() : QStringLiteral("chart");
  QString name = base;
  name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9_.-]+")), QStringLiteral("_"));
  const QString path = QFileDialog::getSaveFileName(this, chosen->text(), name + (asSvg ? ".svg" : ".png"),
                                                    asSvg ? tr("SVG (*.svg)") : tr("PNG (*.png)"));
  if (!path.isEmpty()) exportTo(path);
  (void)png;
}

}  // namespace ckptdoc::gui
