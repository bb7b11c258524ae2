#pragma once
// The main window: overview, partition layout, params and diff tabs over one Session, a progress bar with a
// cancel button in the status bar, a log dock and a jobs dock (every background job, with cancel), recent
// files, drag and drop, the repair, convert and export dialogs (Checkpoint ▸ Repair… / Convert to
// universal…), ZeRO-3's comparison with 16-bit weights saved elsewhere, and attach mode (a live run's
// snapshots, with a Timeline tab). Ctrl+O open, Ctrl+Shift+O attach, Ctrl+E export, F5 re-analyse, Esc
// cancel.
#include <QMainWindow>

#include "ckptdoc/analysis/report.h"

class QDockWidget;
class QLabel;
class QMenu;
class QProgressBar;
class QPushButton;
class QTabWidget;

namespace ckptdoc::gui {

class FindingsModel;
class JobsModel;
class LayoutView;
class LogDock;
class OverviewView;
class ParamTableModel;
class ParamsView;
class ConvertDialog;
class DiffView;
class RepairDialog;
class SourceRepairDialog;
class Session;
class TimelineView;
class StorageView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Starts opening a checkpoint (catalog only, on a worker) and then its analysis; a failure shows a message
  // box unless quiet (and always the status bar). The UI stays live while a slow file opens.
  void openPath(const QString& path, bool quiet = false);
  void reanalyse();
  // Analysis > Compare with 16-bit weights…: ZeRO-3's fp32 partitions against `path` (diagnose --lp-source),
  // then re-analyses; empty goes back to weights saved beside the checkpoint.
  void compareWithLpWeights(const QString& path);
  void cancelAnalysis();
  // Opens the repair preview for finding `row` of the findings model (non-modal; returns the dialog).
  RepairDialog* openRepair(int findingRow);
  // Checkpoint > Repair…: the same dialog with `kind` preselected (None: the user picks the actions).
  RepairDialog* repairDialog(analysis::RepairKind kind = analysis::RepairKind::None);
  // A source's own repair (DCP, Accelerate, Megatron-core; a Trainer or Accelerate optimizer folder):
  // what openRepair and repairDialog open for one, returning null themselves.
  SourceRepairDialog* sourceRepairDialog(analysis::RepairKind kind = analysis::RepairKind::None);
  // Checkpoint > Convert to universal…
  ConvertDialog* convertDialog();
  // Opens the Diff tab comparing the open checkpoint (A) with `other` (B), as a job.
  void compareWith(const QString& other);
  void showTab(const QString& name);  // "overview" | "layout" | "params" | "diff" | "timeline" | "storage"
  // Attach mode: follows a folder of live-run snapshots; the newest one is shown like an opened checkpoint
  // and the Timeline tab plots them all.
  void attach(const QString& dir);
  void detach();
  void selectParam(const QString& name) { selectParamEverywhere(name); }

  Session* session() const { return session_; }
  FindingsModel* findingsModel() const { return findings_; }
  JobsModel* jobsModel() const { return jobs_; }
  ParamTableModel* paramModel() const { return params_; }
  OverviewView* overview() const { return overview_; }
  LayoutView* layoutView() const { return layout_; }
  ParamsView* paramsView() const { return paramsView_; }
  DiffView* diffView() const { return diff_; }
  TimelineView* timelineView() const { return timeline_; }
  StorageView* storageView() const { return storage_; }
  LogDock* logDock() const { return log_; }
  QProgressBar* progressBar() const { return progress_; }
  QPushButton* cancelButton() const { return cancel_; }

 protected:
  void closeEvent(QCloseEvent* e) override;
  void dragEnterEvent(QDragEnterEvent* e) override;
  void dropEvent(QDropEvent* e) override;

 private:
  void buildMenus();
  void rebuildRecentMenu();
  void openDialog();
  void attachDialog();
  void showAttachState();
  void exportDialog();
  void compareDialog();
  void selectParamEverywhere(const QString& name);
  void onAnalysisEnded();

  Session* session_;
  FindingsModel* findings_;
  JobsModel* jobs_;
  ParamTableModel* params_;
  QTabWidget* tabs_;
  OverviewView* overview_;
  LayoutView* layout_;
  ParamsView* paramsView_;
  DiffView* diff_;
  TimelineView* timeline_;
  StorageView* storage_;
  LogDock* log_;
  QDockWidget* jobsDock_;
  QProgressBar* progress_;
  QLabel* stage_;
  QPushButton* cancel_;
  QMenu* recentMenu_ = nullptr;
  QAction* exportAction_ = nullptr;
  QAction* compareAction_ = nullptr;
  QAction* repairAction_ = nullptr;
  QAction* convertAction_ = nullptr;
  QAction* lpSourceAction_ = nullptr;
  QAction* reanalyseAction_ = nullptr;
  QAction* detachAction_ = nullptr;
  bool syncing_ = false;
  bool quietOpen_ = false;
};

}  // namespace ckptdoc::gui
