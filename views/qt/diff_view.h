#pragma once
// The Diff tab: the open checkpoint (A) against another source (B) tensor by tensor, as `ckptdoc diff` does.
// The comparison runs as a session job (progress and cancel here; a new request — another B, `what` or
// tolerance — supersedes the running one); the table lists the rows worst first and sorts by any column;
// selecting a row shows its numbers and the histogram of log10 |A−B| (A > B and B > A apart).
#include <QPointer>
#include <QWidget>
#include <memory>

#include "ckptdoc/analysis/diff.h"
#include "ckptdoc/session/job.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QTableView;

namespace ckptdoc::gui {

class ChartPanel;
class DiffModel;
class Session;

class DiffView : public QWidget {
  Q_OBJECT
 public:
  DiffView(Session* session, QWidget* parent = nullptr);

  // Compares the open source with `other` (a checkpoint, Hugging Face folder or weights file).
  void compareWith(const QString& other);
  void setWhat(analysis::DiffWhat what);
  // Equal when |a - b| <= atol + rtol * |b|; both >= 0.
  void setTolerance(double atol, double rtol);
  // Starts the comparison again with the current settings (superseding a running one); false when there is
  // nothing to compare.
  bool rerun();
  void cancel();
  void selectTensor(const QString& name);

  bool running() const { return job_ && !job_->finished(); }
  session::JobPtr job() const { return job_; }
  QString other() const { return other_; }
  analysis::DiffOptions options() const;
  QString errorText() const { return error_; }
  QString summaryText() const;
  QString sidesText() const;  // "A: … B: …", or what to do to get there
  QString detailsText() const;

  DiffModel* model() const { return model_; }
  QSortFilterProxyModel* proxy() const { return proxy_; }
  QTableView* table() const { return table_; }
  ChartPanel* chart() const { return chart_; }
  QComboBox* whatBox() const { return what_; }
  QLineEdit* atolEdit() const { return atol_; }
  QLineEdit* rtolEdit() const { return rtol_; }
  QProgressBar* progressBar() const { return progress_; }
  QPushButton* cancelButton() const { return cancel_; }

 signals:
  void diffStarted();
  void diffFinished();
  void diffFailed(const QString& message);
  void diffCancelled();
  void compareRequested();  // the "Compare with…" button: the window asks for B

 private:
  void onResult(const std::shared_ptr<const analysis::DiffResult>& result);
  void onRowSelected();
  void onSourceChanged();
  void showPrompt();
  void updateProgress();

  Session* session_;
  DiffModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  ChartPanel* chart_;
  QLabel* sides_;
  QLabel* summary_;
  QLabel* details_;
  QComboBox* what_;
  QLineEdit* atol_;
  QLineEdit* rtol_;
  QProgressBar* progress_;
  QPushButton* cancel_;
  QString other_;
  QString error_;
  analysis::DiffOptions last_;  // of the latest request
  session::JobPtr job_;
};

}  // namespace ckptdoc::gui
