#include "diff_view.h"

#include <spdlog/spdlog.h>

#include <QComboBox>
#include <QDoubleValidator>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <cmath>

#include "chart_builder.h"
#include "chart_panel.h"
#include "diff_model.h"
#include "session.h"

namespace ckptdoc::gui {

namespace {

constexpr analysis::DiffWhat kWhats[] = {analysis::DiffWhat::Fp32, analysis::DiffWhat::Lp,
                                         analysis::DiffWhat::ExpAvg, analysis::DiffWhat::ExpAvgSq};

QString number(double v) {
  return std::isinf(v) ? QStringLiteral("inf") : QString::number(v, 'g', 6);
}

}  // namespace

DiffView::DiffView(Session* session, QWidget* parent) : QWidget(parent), session_(session) {
  model_ = new DiffModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(DiffModel::SortRole);

  auto* compare = new QPushButton(tr("Compare with…"), this);
  compare->setObjectName(QStringLiteral("diffCompareButton"));
  connect(compare, &QPushButton::clicked, this, &DiffView::compareRequested);
  what_ = new QComboBox(this);
  what_->setObjectName(QStringLiteral("diffWhat"));
  for (auto w : kWhats) what_->addItem(QString::fromUtf8(analysis::diff_what_name(w).data()));
  what_->setToolTip(
      tr("What of a DeepSpeed checkpoint is compared: consolidated fp32 masters, 16-bit weights or "
         "an Adam moment (weights files and Hugging Face folders have weights only)"));
  auto* validator = new QDoubleValidator(0, 1e300, 12, this);
  validator->setNotation(QDoubleValidator::ScientificNotation);
  atol_ = new QLineEdit(QStringLiteral("0"), this);
  atol_->setObjectName(QStringLiteral("diffAtol"));
  rtol_ = new QLineEdit(QStringLiteral("0"), this);
  rtol_->setObjectName(QStringLiteral("diffRtol"));
  for (auto* e : {atol_, rtol_}) {
    e->setValidator(validator);
    e->setMaximumWidth(90);
    e->setToolTip(tr("Equal when |a − b| ≤ atol + rtol·|b| (torch.allclose); 0 and 0 = exact"));
    connect(e, &QLineEdit::editingFinished, this, [this] {
      const auto o = options();
      if (o.atol != last_.atol || o.rtol != last_.rtol) rerun();  // leaving the field unchanged asks nothing
    });
  }
  connect(what_, &QComboBox::currentIndexChanged, this, [this] { rerun(); });
  progress_ = new QProgressBar(this);
  progress_->setObjectName(QStringLiteral("diffProgress"));
  progress_->setRange(0, 1000);
  progress_->setMaximumWidth(200);
  progress_->setTextVisible(false);
  progress_->hide();
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setObjectName(QStringLiteral("diffCancelButton"));
  cancel_->setFlat(true);
  cancel_->hide();
  connect(cancel_, &QPushButton::clicked, this, &DiffView::cancel);

  auto* bar = new QHBoxLayout;
  bar->addWidget(compare);
  bar->addWidget(new QLabel(tr("What:"), this));
  bar->addWidget(what_);
  bar->addWidget(new QLabel(tr("atol:"), this));
  bar->addWidget(atol_);
  bar->addWidget(new QLabel(tr("rtol:"), this));
  bar->addWidget(rtol_);
  bar->addStretch(1);
  bar->addWidget(progress_);
  bar->addWidget(cancel_);

  sides_ = new QLabel(this);
  sides_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  sides_->setWordWrap(true);
  summary_ = new QLabel(this);
  summary_->setObjectName(QStringLiteral("diffSummary"));
  summary_->setWordWrap(true);

  table_ = new QTableView(this);
  table_->setObjectName(QStringLiteral("diffTable"));
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->horizontalHeader()->setSortIndicatorShown(true);
  table_->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);  // worst first, as core ordered them
  proxy_->sort(-1);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->setVisible(false);
  // The numbers always fit and the name takes what is left, elided in the middle (both ends of a param name
  // matter): with the name sized to its contents, a long name pushed "Within tol." off a narrow window.
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(DiffModel::Name, QHeaderView::Stretch);
  table_->horizontalHeader()->setMinimumSectionSize(60);
  table_->setTextElideMode(Qt::ElideMiddle);
  table_->setWordWrap(false);  // a wrapped name ("layers.\n0.mlp.up.weight") doubled every row's height
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &DiffView::onRowSelected);

  details_ = new QLabel(this);
  details_->setObjectName(QStringLiteral("diffDetails"));
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  details_->setWordWrap(false);  // explicit line breaks: a wrapped label in a layout may keep a stale height
  details_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  chart_ = new ChartPanel(this);
  chart_->setObjectName(QStringLiteral("diffChart"));
  chart_->setMinimumHeight(220);
  auto* right = new QWidget(this);
  auto* rightLayout = new QVBoxLayout(right);
  rightLayout->setContentsMargins(0, 0, 0, 0);
  rightLayout->addWidget(details_);
  rightLayout->addWidget(chart_, 1);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(table_);
  split->addWidget(right);
  split->setStretchFactor(0, 2);  // the table's nine columns need the room more than the histogram
  split->setStretchFactor(1, 1);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(sides_);
  layout->addWidget(summary_);
  layout->addWidget(split, 1);

  showPrompt();
  connect(session_, &Session::opened, this, &DiffView::onSourceChanged);
  connect(session_, &Session::closed, this, &DiffView::onSourceChanged);
  connect(session_, &Session::jobsProgressed, this, &DiffView::updateProgress);
}

analysis::DiffOptions DiffView::options() const {
  analysis::DiffOptions o;
  o.what = kWhats[std::max(0, what_->currentIndex())];
  o.atol = atol_->text().toDouble();
  o.rtol = rtol_->text().toDouble();
  o.histograms = true;
  return o;
}

void DiffView::compareWith(const QString& other) {
  other_ = other;
  rerun();
}

void DiffView::setWhat(analysis::DiffWhat what) {
  for (int i = 0; i < static_cast<int>(std::size(kWhats)); ++i)
    if (kWhats[i] == what) what_->setCurrentIndex(i);  // reruns when it changed
}

void DiffView::setTolerance(double atol, double rtol) {
  atol_->setText(QString::number(atol, 'g', 12));
  rtol_->setText(QString::number(rtol, 'g', 12));
  rerun();
}

bool DiffView::rerun() {
  if (other_.isEmpty() || !session_->isOpen()) return false;
  const auto o = options();
  last_ = o;
  error_.clear();
  model_->clear();
  details_->clear();
  chart_->setChartOwned(emptyChart(tr("A − B"), tr("select a tensor")));
  sides_->setText(tr("A: %1\nB: %2").arg(session_->path(), other_));
  if (!(o.atol >= 0) || !(o.rtol >= 0)) {
    error_ = tr("atol and rtol must be numbers ≥ 0");
    summary_->setText(error_);
    return false;
  }
  summary_->setText(tr("Comparing (%1)…").arg(QString::fromUtf8(analysis::diff_what_name(o.what).data())));
  QPointer<DiffView> self(this);
  job_ = session_->diff(other_, o, [self](session::Outcome<analysis::DiffResult>& out) {
    if (!self || out.superseded()) return;  // a newer request's result is on its way
    self->progress_->hide();
    self->cancel_->hide();
    if (out.ok()) {
      self->onResult(std::make_shared<const analysis::DiffResult>(std::move(*out.value)));
      return;
    }
    const auto& e = *out.error;
    if (e.kind == session::ErrorKind::Cancelled) {
      self->summary_->setText(tr("Comparison cancelled"));
      emit self->diffCancelled();
      return;
    }
    self->error_ = gui::errorText(e);
    self->summary_->setText(tr("Cannot compare: %1").arg(self->error_));
    spdlog::error("diff failed: {}", e.message);
    emit self->diffFailed(self->error_);
  });
  progress_->setValue(0);
  progress_->show();
  cancel_->show();
  emit diffStarted();
  return true;
}

void DiffView::cancel() {
  if (job_) job_->cancel();
}

void DiffView::updateProgress() {
  if (running()) progress_->setValue(static_cast<int>(job_->fraction() * 1000));
}

void DiffView::onSourceChanged() {
  // A of a finished diff is gone; a running one was superseded by the session.
  model_->clear();
  details_->clear();
  progress_->hide();
  cancel_->hide();
  const model::Catalog* catalog = session_->catalog();
  const bool weightsOnly = catalog && catalog->weights_only;
  for (int i = 1; i < what_->count(); ++i)
    what_->setItemData(i, weightsOnly ? QVariant(0) : QVariant(), Qt::UserRole - 1);  // disables the item
  if (weightsOnly && what_->currentIndex() != 0)
    what_->setCurrentIndex(0);  // reruns
  else if (!rerun())
    summary_->clear();
  if (other_.isEmpty()) showPrompt();
}

void DiffView::showPrompt() {
  // With a source open, only B is missing: "Open a checkpoint" would send the user to open it again.
  sides_->setText(session_->isOpen()
                      ? tr("A: %1\nB: none yet. Pick it with File → Compare with…").arg(session_->path())
                      : tr("Open a checkpoint, then File → Compare with… to compare it with another."));
}

QString DiffView::summaryText() const {
  return summary_->text();
}
QString DiffView::sidesText() const {
  return sides_->text();
}
QString DiffView::detailsText() const {
  return details_->text();
}

void DiffView::onResult(const std::shared_ptr<const analysis::DiffResult>& r) {
  model_->setResult(r);
  size_t different = 0;
  for (const auto& d : r->compared) different += d.same() ? 0 : 1;
  sides_->setText(tr("A: %1\nB: %2").arg(QString::fromStdString(r->a), QString::fromStdString(r->b)));
  summary_->setText(
      tr("%1 — %2 tensors compared: %3 equal, %4 different; %5 only in A, %6 only in B, %7 changed "
         "shape")
          .arg(r->equal() ? tr("equal") : tr("different"))
          .arg(r->compared.size())
          .arg(r->compared.size() - different)
          .arg(different)
          .arg(r->removed.size())
          .arg(r->added.size())
          .arg(r->shape_changed.size()));
  spdlog::info("diff: {} tensors compared, {} different", r->compared.size(), different);
  if (model_->rowCount() > 0) table_->selectRow(0);
  emit diffFinished();
}

void DiffView::selectTensor(const QString& name) {
  const int row = model_->rowOf(name);
  if (row < 0) return;
  const auto index = proxy_->mapFromSource(model_->index(row, 0));
  table_->selectRow(index.row());
  table_->scrollTo(index);
}

void DiffView::onRowSelected() {
  const auto current = proxy_->mapToSource(table_->currentIndex());
  const int row = current.row();
  const auto* t = model_->tensor(row);
  const QString name = model_->name(row);
  if (row < 0) {
    details_->clear();
    return;
  }
  const auto status = model_->status(row);
  if (!t) {
    details_->setText(tr("<b>%1</b>: only in %2")
                          .arg(name.toHtmlEscaped(), status == DiffModel::RowStatus::Removed
                                                         ? QStringLiteral("A")
                                                         : QStringLiteral("B")));
    chart_->setChartOwned(emptyChart(name, tr("only in one source: nothing to compare")));
    return;
  }
  if (status == DiffModel::RowStatus::ShapeChanged) {
    details_->setText(tr("<b>%1</b>: the shape changed, values not compared").arg(name.toHtmlEscaped()));
    chart_->setChartOwned(emptyChart(name, tr("the shape changed: nothing to compare")));
    return;
  }
  details_->setText(
      tr("<b>%1</b> — %2<br>elements %3, exactly equal %4 (%5 %), within tolerance %6<br>non-finite "
         "mismatches %7<br>max |A−B| %8, ||A−B|| / ||B|| %9")
          .arg(name.toHtmlEscaped(), DiffModel::statusName(status))
          .arg(t->numel)
          .arg(t->exact)
          .arg(t->exact_fraction() * 100.0, 0, 'f', 3)
          .arg(t->close)
          .arg(t->nonfinite)
          .arg(number(t->max_abs), number(t->rel_l2())));
  if (t->histogram)
    chart_->setChartOwned(logHistogramChart(tr("|A − B| of %1").arg(name), tr("log10 |A − B|"),
                                            t->histogram->above, &t->histogram->below, tr("A > B"),
                                            tr("B > A")));  // legends read '<' as markup
  else
    chart_->setChartOwned(emptyChart(name, tr("no histogram")));
}

}  // namespace ckptdoc::gui
