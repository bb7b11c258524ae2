#include "layout_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include "layout_map.h"
#include "legend_label.h"
#include "param_strip.h"
#include "session.h"

namespace ckptdoc::gui {

LayoutView::LayoutView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(6, 6, 6, 6);
  strip_ = new ParamStrip(session_, this);
  strip_->setToolTip(tr("Every param in layout order; click one to select it"));
  v->addWidget(strip_);
  v->addWidget(new StripLegend(session_, this));
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Group:"), this));
  groups_ = new QComboBox(this);
  groups_->setObjectName(QStringLiteral("groupSelector"));
  groups_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  bar->addWidget(groups_);
  bar->addWidget(new QLabel(tr("Shade by:"), this));
  shade_ = new QComboBox(this);
  shade_->setObjectName(QStringLiteral("shadeSelector"));
  for (auto s : {session::Shade::Param, session::Shade::ExactFraction, session::Shade::NonFinite,
                 session::Shade::MomentMagnitude})
    shade_->addItem(QString::fromUtf8(session::shade_label(s).data()), static_cast<int>(s));
  bar->addWidget(shade_);
  auto* fit = new QPushButton(tr("Fit"), this);
  fit->setToolTip(tr("Show the whole partition and every rank (double-click the map)"));
  bar->addWidget(fit);
  bar->addStretch(1);
  v->addLayout(bar);
  legend_ = new QLabel(this);
  legend_->setObjectName(QStringLiteral("shadeLegend"));
  legend_->setTextFormat(Qt::RichText);
  legend_->setWordWrap(true);
  v->addWidget(legend_);
  auto* infoRow = new QHBoxLayout;
  info_ = new QLabel(this);
  info_->setObjectName(QStringLiteral("layoutInfo"));
  info_->setStyleSheet(QStringLiteral("color: #555;"));
  infoRow->addWidget(info_, 1);
  auto* hint = new QLabel(
      tr("wheel: zoom · drag: pan · shift+wheel: ranks · ctrl+wheel: row height · click: select"), this);
  hint->setStyleSheet(QStringLiteral("color: #888;"));
  infoRow->addWidget(hint);
  v->addLayout(infoRow);
  map_ = new LayoutMap(this);
  map_->setJobQueue(&session_->core().queue());  // pictures are made on a worker
  v->addWidget(map_, 1);

  connect(groups_, &QComboBox::currentIndexChanged, this, &LayoutView::showGroup);
  connect(shade_, &QComboBox::currentIndexChanged, this, [this] {
    map_->setShade(static_cast<session::Shade>(shade_->currentData().toInt()));
    updateLegend();
  });
  // A shade the user picked stays for this source; otherwise each analysis shades by its worst finding.
  connect(shade_, &QComboBox::activated, this, [this] { shadeChosen_ = true; });
  connect(fit, &QPushButton::clicked, map_, &LayoutMap::fitToWidth);
  connect(map_, &LayoutMap::paramClicked, this, [this](int param) {
    const auto* g = map_->group();
    if (!g || param < 0) return;
    emit paramSelected(QString::fromStdString(g->params[static_cast<size_t>(param)].name));
  });
  connect(strip_, &ParamStrip::paramClicked, this, &LayoutView::paramSelected);
  connect(session_, &Session::opened, this, [this] {
    if (!session_->isAttached()) shadeChosen_ = false;  // each snapshot of a followed run is "opened"
    reload();
  });
  connect(session_, &Session::closed, this, &LayoutView::reload);
  connect(session_, &Session::analysisStarted, this, [this] { map_->setHealth(nullptr); });
  connect(session_, &Session::analysisFinished, this, [this] {
    map_->setHealth(session_->core().health_ptr());
    if (!shadeChosen_ && !shadePinned_) showShade(session::shade_for(session_->core().findings()));
    updateLegend();
  });
  reload();
  updateLegend();
}

void LayoutView::reload() {
  QSignalBlocker block(groups_);
  groups_->clear();
  const auto* cat = session_->catalog();
  if (cat)
    for (const auto& g : cat->groups) {
      // Coordinates in a tensor/pipeline/expert-parallel job: the model-parallel rank shown, the expert
      // instance.
      QString where = QString::fromStdString(cat->slice_label());
      if (g.expert)
        where += (where.isEmpty() ? QString() : QStringLiteral(", ")) + tr("experts of ep %1").arg(g.ep_rank);
      groups_->addItem(
          tr("%1 — %2 params, %3 elements%4")
              .arg(g.index)
              .arg(g.params.size())
              .arg(g.numel)
              .arg(where.isEmpty() ? QString() : QStringLiteral(" (") + where + QStringLiteral(")")));
    }
  map_->setHealth(session_->core().health_ptr());
  showGroup(groups_->count() ? 0 : -1);
}

void LayoutView::setGroupIndex(int group) {
  if (group >= 0 && group < groups_->count()) groups_->setCurrentIndex(group);
}

void LayoutView::showGroup(int index) {
  const model::Catalog* cat = session_->catalog();
  if (!cat || index < 0 || index >= static_cast<int>(cat->groups.size())) {
    map_->setGroup(nullptr, nullptr);
    info_->clear();
    return;
  }
  const auto& g = cat->groups[static_cast<size_t>(index)];
  map_->setGroup(session_->sharedCatalog(), &g);
  const auto& t = cat->topology;
  QString par;
  if (t.model_parallel())
    par = tr(" · pipeline %1 x tensor %2: showing %3")
              .arg(t.pp)
              .arg(t.tp)
              .arg(QString::fromStdString(cat->slice_label()));
  if (g.expert) par += tr(" · experts of expert-parallel rank %1 of %2").arg(g.ep_rank).arg(t.ep);
  info_->setText(tr("%1 · %2 ranks · partition %3 elements · %4 padding elements%5")
                     .arg(QString::fromStdString(cat->partitioning_text))
                     .arg(g.partitions.size())
                     .arg(g.partition_numel)
                     .arg(g.padded_numel - g.numel)
                     .arg(par));
}

void LayoutView::updateLegend() {
  legend_->setText(legendHtml(session::shade_legend(map_->shade(), session_->core().health())));
}

void LayoutView::showShade(session::Shade shade) {
  shade_->setCurrentIndex(shade_->findData(static_cast<int>(shade)));
}

void LayoutView::pinShade(session::Shade shade) {
  shadePinned_ = true;
  showShade(shade);
}

void LayoutView::selectParam(const QString& name) {
  strip_->setSelectedParam(name);
  const auto* cat = session_->catalog();
  if (!cat) return;
  const auto where = cat->find_param(name.toStdString());
  if (!where) {
    map_->setSelectedParam(-1);
    return;
  }
  if (groups_->currentIndex() != where->first) groups_->setCurrentIndex(where->first);
  map_->setSelectedParam(where->second);
}

}  // namespace ckptdoc::gui
