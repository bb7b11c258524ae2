#include "overview_view.h"

#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QScrollArea>
#include <QStringList>
#include <QVBoxLayout>

#include "ckptdoc/analysis/verdict.h"
#include "ckptdoc/human_bytes.h"
#include "findings_model.h"
#include "legend_label.h"
#include "param_strip.h"
#include "session.h"
#include "severity_style.h"

namespace ckptdoc::gui {

namespace {
QString humanBytes(uint64_t b) {
  return QString::fromStdString(ckptdoc::human_bytes(b));
}
// "2 errors, 1 warning": what both summaries' status lines say of a report.
QString findingCounts(const analysis::Report& r) {
  int errors = 0, warnings = 0;
  for (const auto& f : r.findings) {
    errors += f.severity == analysis::Severity::Error;
    warnings += f.severity == analysis::Severity::Warning;
  }
  return (errors == 1 ? OverviewView::tr("1 error") : OverviewView::tr("%1 errors").arg(errors)) + ", " +
         (warnings == 1 ? OverviewView::tr("1 warning") : OverviewView::tr("%1 warnings").arg(warnings));
}

}  // namespace

OverviewView::OverviewView(Session* session, FindingsModel* findings, QWidget* parent)
    : QWidget(parent), session_(session), findings_(findings) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  outer->addWidget(scroll);

  auto* page = new QWidget;
  auto* layout = new QVBoxLayout(page);
  layout->setContentsMargins(18, 14, 18, 14);
  layout->setSpacing(10);
  title_ = new QLabel(page);
  title_->setObjectName(QStringLiteral("overviewTitle"));
  title_->setStyleSheet(QStringLiteral("font-size: 16pt; font-weight: 600;"));
  title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_ = new QLabel(page);
  summary_->setObjectName(QStringLiteral("overviewSummary"));
  summary_->setTextFormat(Qt::RichText);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_ = new QLabel(page);
  status_->setObjectName(QStringLiteral("overviewStatus"));
  status_->setStyleSheet(QStringLiteral("color: #555;"));
  strip_ = new ParamStrip(session_, page);
  strip_->setToolTip(
      tr("Every param in layout order: divergence, moment magnitude and NaN/Inf; click to select"));
  cards_ = new QWidget(page);
  cardsLayout_ = new QVBoxLayout(cards_);
  cardsLayout_->setContentsMargins(0, 0, 0, 0);
  cardsLayout_->setSpacing(8);
  layout->addWidget(title_);
  layout->addWidget(summary_);
  layout->addWidget(status_);
  layout->addWidget(strip_);
  stripLegend_ = new StripLegend(session_, page);
  layout->addWidget(stripLegend_);
  layout->addWidget(cards_);
  layout->addStretch(1);
  scroll->setWidget(page);

  connect(findings_, &QAbstractItemModel::modelReset, this, &OverviewView::rebuildCards);
  connect(session_, &Session::opened, this, &OverviewView::rebuildSummary);
  connect(session_, &Session::closed, this, &OverviewView::rebuildSummary);
  connect(session_, &Session::analysisStarted, this, [this] { status_->setText(tr("Analysing…")); });
  connect(session_, &Session::opening, this,
          [this](const QString& path) { status_->setText(tr("Opening %1…").arg(path)); });
  connect(session_, &Session::openFailed, this, [this](const QString& path, const QString& m) {
    status_->setText(tr("Cannot open %1: %2").arg(path, m));
  });
  connect(strip_, &ParamStrip::paramClicked, this, &OverviewView::paramActivated);
  connect(session_, &Session::analysisFinished, this, &OverviewView::rebuildSummary);
  connect(session_, &Session::analysisCancelled, this,
          [this] { status_->setText(tr("Analysis cancelled. Press F5 to analyse again.")); });
  connect(session_, &Session::analysisFailed, this,
          [this](int, const QString& m) { status_->setText(tr("Analysis failed: %1").arg(m)); });
  rebuildSummary();
  rebuildCards();
}

void OverviewView::rebuildSummary() {
  const model::Catalog* cat = session_->catalog();  // the neutral part: the source wrote what to print
  // The strip draws the catalog's params: a storage map has its own picture, in the Storage tab.
  strip_->setVisible(cat || !session_->core().storage_map());
  stripLegend_->setVisible(strip_->isVisibleTo(this));
  if (!cat && session_->core().storage_map()) {
    rebuildStorageSummary();
    return;
  }
  if (!cat) {
    title_->setText(tr("No checkpoint open"));
    summary_->setText(
        tr("Open a DeepSpeed save folder, tag folder or rank file with <b>Ctrl+O</b>, "
           "or drop it onto this window."));
    status_->clear();
    return;
  }
  title_->setText(QString::fromStdString(cat->tag_dir));
  int params = 0;
  for (const auto& g : cat->groups) params += static_cast<int>(g.params.size());
  QString rows;
  auto row = [&rows](const QString& k, const QString& v) {
    rows +=
        QStringLiteral("<tr><td style='color:#666; padding-right:14px'>%1</td><td>%2</td></tr>").arg(k, v);
  };
  row(tr("Tag"), QString::fromStdString(cat->tag));
  if (!cat->optimizer_text.empty()) row(tr("Optimizer"), QString::fromStdString(cat->optimizer_text));
  row(tr("Weights"), QString::fromStdString(std::string(dtype_name(cat->lp_dtype))));
  row(tr("World"), tr("data parallel %1, model parallel %2").arg(cat->dp_world_size).arg(cat->mp_world_size));
  row(tr("Params"), tr("%1 trainable in %2 groups (%3 elements), %4 frozen")
                        .arg(params)
                        .arg(cat->groups.size())
                        .arg(QLocale().toString(static_cast<qlonglong>(cat->trainable_numel())))
                        .arg(cat->frozen_params.size()));
  row(tr("Steps"),
      tr("global %1, skipped %2%3")
          .arg(cat->global_steps)
          .arg(cat->skipped_steps)
          .arg(cat->optimizer_step ? tr(", optimizer step %1").arg(*cat->optimizer_step) : QString()));
  row(tr("Files"), tr("%1 files, %2").arg(cat->file_count).arg(humanBytes(cat->file_bytes)));
  for (const auto& f : cat->facts) row(QString::fromStdString(f.label), QString::fromStdString(f.value));
  summary_->setText(QStringLiteral("<table>%1</table>").arg(rows));

  if (const auto* r = session_->report()) {
    status_->setText(tr("Analysed %1 in %2 s on %3: %4.")
                         .arg(humanBytes(r->bytes_scanned))
                         .arg(r->seconds, 0, 'f', 2)
                         .arg(QString::fromStdString(r->backend))
                         .arg(findingCounts(*r)));
  } else if (!session_->analysing()) {
    status_->setText(tr("Not analysed yet (F5)."));
  }
}

// The open storage map's summary: its folder, format, files and keys.
void OverviewView::rebuildStorageSummary() {
  const auto& map = *session_->core().storage_map();
  title_->setText(QString::fromStdString(map.path));
  uint64_t bytes = 0;
  int absent = 0, tensors = 0;
  for (const auto& f : map.files) {
    bytes += f.size;
    absent += f.present ? 0 : 1;
  }
  for (const auto& k : map.keys) tensors += k.tensor ? 1 : 0;
  QString rows;
  auto row = [&rows](const QString& k, const QString& v) {
    rows +=
        QStringLiteral("<tr><td style='color:#666; padding-right:14px'>%1</td><td>%2</td></tr>").arg(k, v);
  };
  row(tr("Format"), QString::fromStdString(map.format));
  row(tr("Keys"),
      tr("%1 tensors, %2 other items").arg(tensors).arg(static_cast<int>(map.keys.size()) - tensors));
  row(tr("Files"), tr("%1 storage files, %2%3")
                       .arg(map.files.size())
                       .arg(humanBytes(bytes))
                       .arg(absent ? tr(", %1 not on disk").arg(absent) : QString()));
  summary_->setText(QStringLiteral("<table>%1</table>").arg(rows));
  if (const auto* r = session_->report()) {
    status_->setText(tr("Diagnosed: %1. The Storage tab shows its files and keys.").arg(findingCounts(*r)));
  } else if (!session_->analysing()) {
    status_->setText(tr("Not analysed yet (F5)."));
  }
}

void OverviewView::rebuildCards() {
  while (auto* item = cardsLayout_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  // The verdict and what it rests on: "No problems found" only after comparing something
  // (analysis/verdict.h).
  if (const auto* report = session_->report(); report && session_->catalog()) {
    const analysis::Verdict v = analysis::verdict_of(*report, *session_->catalog());
    if (v.kind != analysis::VerdictKind::Problems) {
      QString text = QString::fromStdString(v.headline + " Checked: " + v.basis + ".");
      for (const auto& n : v.not_checked)
        text += QStringLiteral("\n") + tr("Not checked: ") + QString::fromStdString(n) + ".";
      auto* ok = new QLabel(text, cards_);
      ok->setObjectName(QStringLiteral("noProblemsLabel"));
      ok->setWordWrap(true);
      const bool clean = v.kind == analysis::VerdictKind::Clean;
      ok->setStyleSheet(clean
                            ? QStringLiteral("QLabel { background: #e8f5e9; border-left: 5px solid #2e7d32; "
                                             "padding: 10px; border-radius: 3px; }")
                            : QStringLiteral("QLabel { background: #fff8e1; border-left: 5px solid #f9a825; "
                                             "padding: 10px; border-radius: 3px; }"));
      cardsLayout_->addWidget(ok);
    }
  }
  // A self-reporting source's verdict is its own diagnosis' sentence (what `ckptdoc diagnose` prints).
  if (const auto* d = session_->core().source_diagnosis()) {
    QString text = QString::fromStdString(d->verdict);
    for (const auto& n : d->not_checked)
      text += QStringLiteral("\n") + tr("Not checked: ") + QString::fromStdString(n) + ".";
    auto* verdict = new QLabel(text, cards_);
    verdict->setObjectName(QStringLiteral("sourceVerdictLabel"));
    verdict->setWordWrap(true);
    verdict->setStyleSheet(
        d->clean ? QStringLiteral("QLabel { background: #e8f5e9; border-left: 5px solid #2e7d32; "
                                  "padding: 10px; border-radius: 3px; }")
                 : QStringLiteral("QLabel { background: #fdecea; border-left: 5px solid #c62828; "
                                  "padding: 10px; border-radius: 3px; }"));
    cardsLayout_->addWidget(verdict);
  }
  for (int row = 0; row < findings_->count(); ++row) {
    const auto& f = findings_->finding(row);
    auto* card = new QFrame(cards_);
    card->setObjectName(QStringLiteral("finding_%1").arg(QString::fromStdString(f.code)));
    card->setStyleSheet(
        QStringLiteral("QFrame#%1 { background: %2; border-left: 5px solid %3; border-radius: 3px; }")
            .arg(card->objectName(), severityBackground(f.severity).name(),
                 severityColor(f.severity).name()));
    auto* h = new QHBoxLayout(card);
    h->setContentsMargins(12, 8, 10, 8);
    auto* v = new QVBoxLayout;
    auto* head = new QLabel(QStringLiteral("<b style='color:%1'>%2</b>&nbsp;&nbsp;<code>%3</code>")
                                .arg(severityColor(f.severity).name(), severityLabel(f.severity).toUpper(),
                                     QString::fromStdString(f.code).toHtmlEscaped()),
                            card);
    auto* msg = new QLabel(QString::fromStdString(f.message), card);
    msg->setWordWrap(true);
    msg->setTextInteractionFlags(Qt::TextSelectableByMouse);
    v->addWidget(head);
    v->addWidget(msg);
    const QString params =
        findings_->data(findings_->index(row, FindingsModel::Params), Qt::DisplayRole).toString();
    const QString ranks =
        findings_->data(findings_->index(row, FindingsModel::Ranks), Qt::DisplayRole).toString();
    if (!params.isEmpty() || !ranks.isEmpty()) {
      QString detail;
      if (!params.isEmpty()) detail += tr("params: %1").arg(params.toHtmlEscaped());
      if (!ranks.isEmpty())
        detail += (detail.isEmpty() ? QString() : QStringLiteral("&nbsp;&nbsp;·&nbsp;&nbsp;")) +
                  tr("ranks: %1").arg(ranks);
      auto* d = new QLabel(detail, card);
      d->setTextFormat(Qt::RichText);
      d->setStyleSheet(QStringLiteral("color: #555;"));
      d->setWordWrap(true);
      d->setToolTip(
          findings_->data(findings_->index(row, FindingsModel::Params), Qt::ToolTipRole).toString());
      v->addWidget(d);
    }
    if (!f.details.empty()) {  // e.g. unsafe-pickle: file, record, callable, how it is reached
      QStringList facts;
      for (const char* k : {"file", "record", "callable", "how"})
        if (auto it = f.details.find(k); it != f.details.end())
          facts << QStringLiteral("%1: <code>%2</code>")
                       .arg(QString::fromLatin1(k), QString::fromStdString(it->second).toHtmlEscaped());
      auto* d = new QLabel(facts.join(QStringLiteral("&nbsp;&nbsp;·&nbsp;&nbsp;")), card);
      d->setObjectName(QStringLiteral("findingDetails"));
      d->setTextFormat(Qt::RichText);
      d->setStyleSheet(QStringLiteral("color: #555;"));
      d->setWordWrap(true);
      v->addWidget(d);
    }
    h->addLayout(v, 1);
    if (f.repair != analysis::RepairKind::None) {
      auto* fix = new QPushButton(repairLabel(f.repair), card);
      fix->setObjectName(QStringLiteral("fixButton_%1").arg(QString::fromStdString(f.code)));
      fix->setToolTip(tr("Preview the repair; nothing is written until you confirm."));
      fix->setCursor(Qt::PointingHandCursor);
      connect(fix, &QPushButton::clicked, this, [this, row] { emit fixRequested(row); });
      h->addWidget(fix, 0, Qt::AlignVCenter);
    }
    cardsLayout_->addWidget(card);
  }
}

}  // namespace ckptdoc::gui
