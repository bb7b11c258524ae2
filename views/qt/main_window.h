#pragma once
// The main window: overview, partition layout and params tabs over one Session, a progress bar with a
// cancel button in the status bar, a log dock, recent files, drag and drop, and the repair and export
// dialogs. Ctrl+O open, Ctrl+E export, F5 re-analyse, Esc cancel.
#include <QMainWindow>

class QLabel;
class QMenu;
class QProgressBar;
class QPushButton;
class QTabWidget;

namespace ckptdoc::gui {

class FindingsModel;
class LayoutView;
class LogDock;
class OverviewView;
class ParamTableModel;
class ParamsView;
class RepairDialog;
class Session;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens a checkpoint (catalog only) and starts its analysis. False (with a message box unless quiet) on error.
  bool openPath(const QString& path, bool quiet = false);
  void reanalyse();
  void cancelAnalysis();
  // Opens the repair preview for finding `row` of the findings model (non-modal; returns the dialog).
  RepairDialog* openRepair(int findingRow);
  void showTab(const QString& name);  // "overview" | "layout" | "params"

  Session* session() const { return session_; }
  FindingsModel* findingsModel() const { return findings_; }
  ParamTableModel* paramModel() const { return params_; }
  OverviewView* overview() const { return overview_; }
  LayoutView* layoutView() const { return layout_; }
  ParamsView* paramsView() const { return paramsView_; }
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
  void exportDialog();
  void selectParamEverywhere(const QString& name);
  void onAnalysisEnded();

  Session* session_;
  FindingsModel* findings_;
  ParamTableModel* params_;
  QTabWidget* tabs_;
  OverviewView* overview_;
  LayoutView* layout_;
  ParamsView* paramsView_;
  LogDock* log_;
  QProgressBar* progress_;
  QLabel* stage_;
  QPushButton* cancel_;
  QMenu* recentMenu_ = nullptr;
  QAction* exportAction_ = nullptr;
  QAction* reanalyseAction_ = nullptr;
  bool syncing_ = false;
};

}  // namespace ckptdoc::gui
