#include "params_view.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "param_table_model.h"
#include "plots_view.h"
#include "session.h"

namespace ckptdoc::gui {

ParamsView::ParamsView(Session* session, ParamTableModel* model, QWidget* parent)
    : QWidget(parent), session_(session), model_(model) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(4, 4, 4, 4);
  auto* split = new QSplitter(Qt::Vertical, this);
  v->addWidget(split);

  auto* top = new QWidget(split);
  auto* tv = new QVBoxLayout(top);
  tv->setContentsMargins(0, 0, 0, 0);
  auto* bar = new QHBoxLayout;
  filter_ = new QLineEdit(top);
  filter_->setObjectName(QStringLiteral("paramFilter"));
  filter_->setPlaceholderText(tr("Filter params (substring, e.g. \"attn\" or \"layers.3.\")"));
  filter_->setClearButtonEnabled(true);
  regex_ = new QCheckBox(tr("Regex"), top);
  bar->addWidget(new QLabel(tr("Filter:"), top));
  bar->addWidget(filter_, 1);
  bar->addWidget(regex_);
  tv->addLayout(bar);

  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(ParamTableModel::SortRole);
  proxy_->setFilterKeyColumn(ParamTableModel::Name);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  table_ = new QTableView(top);
  table_->setObjectName(QStringLiteral("paramTable"));
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->setWordWrap(false);
  table_->sortByColumn(ParamTableModel::Score, Qt::DescendingOrder);
  tv->addWidget(table_, 1);
  split->addWidget(top);

  plots_ = new PlotsView(session_, split);
  split->addWidget(plots_);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);

  connect(filter_, &QLineEdit::textChanged, this, &ParamsView::applyFilter);
  connect(regex_, &QCheckBox::toggled, this, &ParamsView::applyFilter);
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (!current.isValid()) return;
            const QString name = current.data(ParamTableModel::NameRole).toString();
            if (name == plots_->currentParam()) return;
            plots_->showParam(name);
            emit paramSelected(name);
          });
  connect(model_, &QAbstractItemModel::modelReset, this, [this] {
    table_->resizeColumnsToContents();
    table_->setColumnWidth(ParamTableModel::Name, std::min(table_->columnWidth(ParamTableModel::Name), 360));
  });
}

void ParamsView::setFilter(const QString& text, bool regex) {
  regex_->setChecked(regex);
  filter_->setText(text);
  applyFilter();
}

void ParamsView::applyFilter() {
  const QString text = filter_->text();
  if (regex_->isChecked()) {
    QRegularExpression re(text, QRegularExpression::CaseInsensitiveOption);
    filter_->setStyleSheet(re.isValid() ? QString() : QStringLiteral("QLineEdit { background: #fdecec; }"));
    if (re.isValid()) proxy_->setFilterRegularExpression(re);
  } else {
    filter_->setStyleSheet(QString());
    proxy_->setFilterFixedString(text);
  }
}

void ParamsView::selectParam(const QString& name) {
  const int row = model_->rowOf(name);
  if (row < 0) return;
  const QModelIndex src = model_->index(row, 0);
  QModelIndex idx = proxy_->mapFromSource(src);
  if (!idx.isValid()) {  // hidden by the filter: clear it so the selection is visible
    filter_->clear();
    idx = proxy_->mapFromSource(src);
  }
  table_->selectionModel()->setCurrentIndex(idx,
                                            QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  table_->scrollTo(idx);
  if (plots_->currentParam() != name) plots_->showParam(name);
}

}  // namespace ckptdoc::gui
