#include "main_window.h"

#include <spdlog/spdlog.h>

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <iterator>

#include "app_settings.h"
#include "ckptdoc/repair/fix_offer.h"
#include "ckptdoc/session/request_field_labels.h"
#include "convert_dialog.h"
#include "diff_view.h"
#include "export_dialog.h"
#include "findings_model.h"
#include "jobs_model.h"
#include "layout_map.h"
#include "layout_view.h"
#include "log_dock.h"
#include "overview_view.h"
#include "param_strip.h"
#include "param_table_model.h"
#include "params_view.h"
#include "plots_view.h"
#include "repair_dialog.h"
#include "session.h"
#include "source_repair_dialog.h"
#include "storage_view.h"
#include "timeline_view.h"

namespace ckptdoc::gui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  set_request_field_namer(&session::request_field_label);  // refusals name our controls, not CLI flags
  setWindowTitle(QStringLiteral("ckptdoc"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/ckptdoc.svg")));
  setAcceptDrops(true);
  resize(1280, 820);

  session_ = new Session(this);
  session_->setDevice(AppSettings().device());
  session_->setVerifyChecksums(AppSettings().verifyChecksums());
  findings_ = new FindingsModel(this);
  params_ = new ParamTableModel(this);
  jobs_ = new JobsModel(session_, this);

  tabs_ = new QTabWidget(this);
  tabs_->setDocumentMode(true);
  overview_ = new OverviewView(session_, findings_, tabs_);
  layout_ = new LayoutView(session_, tabs_);
  paramsView_ = new ParamsView(session_, params_, tabs_);
  tabs_->addTab(overview_, tr("Overview"));
  tabs_->addTab(layout_, tr("Partition layout"));
  diff_ = new DiffView(session_, tabs_);
  tabs_->addTab(paramsView_, tr("Params"));
  tabs_->addTab(diff_, tr("Diff"));
  timeline_ = new TimelineView(session_, tabs_);
  tabs_->addTab(timeline_, tr("Timeline"));
  storage_ = new StorageView(session_, tabs_);
  tabs_->addTab(storage_, tr("Storage"));
  setCentralWidget(tabs_);

  log_ = new LogDock(this);
  addDockWidget(Qt::BottomDockWidgetArea, log_);
  log_->hide();
  jobsDock_ = new QDockWidget(tr("Jobs"), this);
  jobsDock_->setObjectName(QStringLiteral("jobsDock"));
  auto* jobsView = new QTableView(jobsDock_);
  jobsView->setObjectName(QStringLiteral("jobsView"));
  jobsView->setModel(jobs_);
  jobsView->setSelectionBehavior(QAbstractItemView::SelectRows);
  jobsView->verticalHeader()->setVisible(false);
  jobsView->horizontalHeader()->setStretchLastSection(true);
  jobsView->setContextMenuPolicy(Qt::ActionsContextMenu);
  auto* cancelJob = new QAction(tr("Cancel job"), jobsView);
  connect(cancelJob, &QAction::triggered, this, [this, jobsView] {
    if (auto j = jobs_->job(jobsView->currentIndex().row())) j->cancel();
  });
  jobsView->addAction(cancelJob);
  jobsDock_->setWidget(jobsView);
  addDockWidget(Qt::BottomDockWidgetArea, jobsDock_);
  jobsDock_->hide();

  stage_ = new QLabel(this);
  progress_ = new QProgressBar(this);
  progress_->setObjectName(QStringLiteral("analysisProgress"));
  progress_->setRange(0, 1000);
  progress_->setMaximumWidth(240);
  progress_->setTextVisible(false);
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setObjectName(QStringLiteral("cancelAnalysisButton"));
  cancel_->setFlat(true);
  statusBar()->addPermanentWidget(stage_);
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancel_);
  progress_->hide();
  cancel_->hide();
  connect(cancel_, &QPushButton::clicked, this, &MainWindow::cancelAnalysis);

  connect(session_, &Session::opening, this, [this](const QString& path) {
    progress_->setRange(0, 0);  // busy: reading pickles and zip directories
    progress_->show();
    cancel_->show();
    stage_->setText(tr("Opening %1…").arg(QFileInfo(path).fileName()));
  });
  connect(session_, &Session::openFailed, this, [this](const QString& path, const QString& error) {
    onAnalysisEnded();
    stage_->setText(tr("Cannot open"));
    statusBar()->showMessage(tr("Cannot open %1: %2").arg(path, error), 10000);
    if (!quietOpen_) QMessageBox::warning(this, tr("Cannot open checkpoint"), error);
  });
  connect(session_, &Session::opened, this, [this] {
    progress_->setRange(0, 1000);
    findings_->setFindings(session_->core().findings());
    params_->setCatalog(session_->catalog());
    const auto ckpt = session_->sharedCatalog();
    // A storage map (DCP, Accelerate, Megatron-core) is exported, compared and repaired by its own source.
    const sources::Source* source = session_->core().storage_source();
    exportAction_->setEnabled(ckpt || (source && source->can(sources::Command::Export)));
    compareAction_->setEnabled(ckpt || (source && source->can(sources::Command::Diff)));
    // ... as is a folder the catalog reads whose repairs are its own (a Trainer's optimizer.pt).
    const sources::Source* repairer = session_->core().repairing_source();
    repairAction_->setEnabled(repairer ? repairer->can(sources::Command::Repair)
                                       : ckpt && !session_->catalog()->weights_only);
    const model::Catalog* cat = session_->catalog();
    convertAction_->setEnabled(cat && cat->convertible);
    lpSourceAction_->setEnabled(cat && cat->lp_weights_elsewhere);
    reanalyseAction_->setEnabled(true);
    if (session_->isAttached()) {  // the run's newest snapshot: the user stays on the tab they look at
      setWindowTitle(
          QStringLiteral("%1 (%2) — ckptdoc")
              .arg(QFileInfo(session_->attachedDir()).fileName(), QFileInfo(session_->path()).fileName()));
    } else {
      setWindowTitle(QStringLiteral("%1 — ckptdoc").arg(QFileInfo(session_->path()).fileName()));
      AppSettings().addRecentFile(QFileInfo(session_->path()).absoluteFilePath());
      rebuildRecentMenu();
      tabs_->setCurrentWidget(overview_);
    }
    if (!session_->analysing()) onAnalysisEnded();
  });
  connect(session_, &Session::analysisStarted, this, [this] {
    params_->setCatalog(session_->catalog());  // the previous report's rows go with it
    findings_->setFindings(session_->core().findings());
    progress_->setRange(0, 1000);
    progress_->setValue(0);
    progress_->show();
    cancel_->show();
    stage_->setText(tr("Analysing…"));
  });
  connect(session_, &Session::analysisProgress, this, [this](const QString& stage, double f) {
    progress_->setValue(static_cast<int>(f * 1000));
    if (!stage.isEmpty()) stage_->setText(stage);
  });
  connect(session_, &Session::analysisFinished, this, [this] {
    findings_->setFindings(session_->core().findings());
    params_->setReport(session_->catalog(), session_->core().report_ptr());
    // The Params tab's plots are empty until a param is selected: open on the worst one.
    if (paramsView_->plots()->currentParam().isEmpty())
      selectParamEverywhere(QString::fromStdString(session_->core().worst_param()));
    onAnalysisEnded();
    stage_->setText(tr("Analysis done"));
    statusBar()->showMessage(tr("Analysed in %1 s").arg(session_->report()->seconds, 0, 'f', 2), 5000);
  });
  connect(session_, &Session::analysisCancelled, this, [this] {
    onAnalysisEnded();
    stage_->setText(tr("Cancelled"));
  });
  connect(session_, &Session::analysisFailed, this, [this](int, const QString& m) {
    onAnalysisEnded();
    stage_->setText(tr("Analysis failed"));
    statusBar()->showMessage(m, 10000);
  });
  connect(diff_, &DiffView::compareRequested, this, &MainWindow::compareDialog);
  connect(overview_, &OverviewView::fixRequested, this, [this](int row) { openRepair(row); });
  connect(overview_, &OverviewView::paramActivated, this, &MainWindow::selectParamEverywhere);
  connect(layout_, &LayoutView::paramSelected, this, &MainWindow::selectParamEverywhere);
  connect(paramsView_, &ParamsView::paramSelected, this, &MainWindow::selectParamEverywhere);
  connect(session_, &Session::attached, this, [this] { showAttachState(); });
  connect(session_, &Session::watchSampled, this, [this] { showAttachState(); });
  connect(session_, &Session::attachEnded, this, [this](const QString& dir, const QString& why) {
    if (session_->isAttached()) return;  // an earlier attach, replaced by the current one
    detachAction_->setEnabled(false);
    if (!why.isEmpty()) {
      timeline_->setNotice(tr("Stopped following %1: %2").arg(dir, why), true);
      statusBar()->showMessage(tr("Stopped following %1: %2").arg(dir, why), 10000);
    } else {
      timeline_->setNotice(tr("Detached from %1.").arg(dir), false);
    }
  });
  connect(session_, &Session::snapshotRemoved, this, [this](const QString& path, bool shown) {
    const QString tag = QFileInfo(path).fileName();
    const QString text =
        shown ? tr("Snapshot %1, the one shown, was deleted: its last analysis stays on screen "
                   "until the next snapshot arrives.")
                    .arg(tag)
              : tr("Snapshot %1 was deleted; its point stays on the timeline.").arg(tag);
    timeline_->setNotice(text, shown);
    statusBar()->showMessage(text, 10000);
  });
  connect(session_, &Session::snapshotUnreadable, this, [this](const QString&, const QString& why) {
    const QString text = tr("A snapshot could not be read (still following the run): %1").arg(why);
    timeline_->setNotice(text, true);
    statusBar()->showMessage(text, 10000);
  });

  buildMenus();
  AppSettings s;
  restoreGeometry(s.geometry());
  restoreState(s.windowState());
  spdlog::info("ckptdoc ready");
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus() {
  auto* file = menuBar()->addMenu(tr("&File"));
  auto* open = file->addAction(tr("&Open checkpoint…"), this, &MainWindow::openDialog);
  open->setShortcut(QKeySequence::Open);
  auto* attachAction = file->addAction(tr("&Attach to run…"), this, &MainWindow::attachDialog);
  attachAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  attachAction->setToolTip(
      tr("Follow a folder of live-run snapshots (ckptdoc_hook's out_dir): the newest one is "
         "shown and the Timeline tab plots them all"));
  detachAction_ = file->addAction(tr("&Detach from run"), this, &MainWindow::detach);
  detachAction_->setEnabled(false);
  recentMenu_ = file->addMenu(tr("Open &recent"));
  rebuildRecentMenu();
  exportAction_ = file->addAction(tr("&Export weights…"), this, &MainWindow::exportDialog);
  exportAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  exportAction_->setEnabled(false);
  compareAction_ = file->addAction(tr("&Compare with…"), this, &MainWindow::compareDialog);
  compareAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_D));
  compareAction_->setToolTip(
      tr("Compare the open checkpoint tensor by tensor with another checkpoint, Hugging "
         "Face folder or weights file"));
  compareAction_->setEnabled(false);
  file->addSeparator();
  auto* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  auto* checkpoint = menuBar()->addMenu(tr("&Checkpoint"));
  repairAction_ = checkpoint->addAction(tr("&Repair…"), this, [this] { repairDialog(); });
  repairAction_->setObjectName(QStringLiteral("repairAction"));
  repairAction_->setToolTip(
      tr("Choose repair actions (refresh fp32, reset or drop the optimizer, re-partition) "
         "and preview the plan before anything is written"));
  repairAction_->setEnabled(false);
  convertAction_ = checkpoint->addAction(tr("Con&vert to universal…"), this, [this] { convertDialog(); });
  convertAction_->setObjectName(QStringLiteral("convertAction"));
  convertAction_->setToolTip(
      tr("Write a DeepSpeed universal checkpoint (load_universal), loadable on any "
         "data-parallel size"));
  convertAction_->setEnabled(false);

  auto* analysis = menuBar()->addMenu(tr("&Analysis"));
  reanalyseAction_ = analysis->addAction(tr("&Re-analyse"), this, &MainWindow::reanalyse);
  reanalyseAction_->setShortcut(QKeySequence(Qt::Key_F5));
  reanalyseAction_->setEnabled(false);
  lpSourceAction_ = analysis->addAction(tr("Compare with &16-bit weights…"), this, [this] {
    const QString f = QFileDialog::getOpenFileName(
        this, tr("16-bit weights saved elsewhere"), QFileInfo(session_->path()).absolutePath(),
        tr("Weights (*.bin *.pt *.pth *.safetensors);;All files (*)"));
    if (!f.isEmpty()) compareWithLpWeights(f);
  });
  lpSourceAction_->setObjectName(QStringLiteral("lpSourceAction"));
  lpSourceAction_->setToolTip(
      tr("ZeRO-3: compare the fp32 partitions with 16-bit weights saved elsewhere "
         "(diagnose --lp-source), e.g. stage3_gather_16bit_weights_on_model_save's file"));
  lpSourceAction_->setEnabled(false);
  auto* cancel = analysis->addAction(tr("&Cancel analysis"), this, &MainWindow::cancelAnalysis);
  cancel->setShortcut(QKeySequence(Qt::Key_Escape));
  auto* device = analysis->addMenu(tr("Compute &device"));
  auto* group = new QActionGroup(this);
  for (auto [label, kind] :
       {std::pair{tr("Auto (CUDA when available)"), DeviceKind::Auto}, std::pair{tr("CPU"), DeviceKind::Cpu},
        std::pair{tr("CUDA"), DeviceKind::Cuda}}) {
    auto* a = device->addAction(label);
    a->setCheckable(true);
    a->setChecked(session_->device() == kind);
    group->addAction(a);
    connect(a, &QAction::triggered, this, [this, kind = kind] {
      session_->setDevice(kind);
      AppSettings().setDevice(kind);
      spdlog::info("compute device: {}", device_name(kind));
    });
  }

  auto* checksums = analysis->addAction(tr("Verify &checksums"));
  checksums->setCheckable(true);
  checksums->setChecked(session_->verifyChecksums());
  checksums->setToolTip(
      tr("Also check every record's CRC-32 on each analysis: finds flipped bits that leave "
         "plausible values, at the cost of reading every file once more"));
  connect(checksums, &QAction::toggled, this, [this](bool on) {
    session_->setVerifyChecksums(on);
    AppSettings().setVerifyChecksums(on);
    spdlog::info("verify checksums: {}", on ? "on" : "off");
  });

  auto* view = menuBar()->addMenu(tr("&View"));
  const char* names[] = {"&Overview", "Partition &layout", "&Params", "&Diff", "&Timeline", "&Storage"};
  for (int i = 0; i < static_cast<int>(std::size(names)); ++i) {
    auto* a = view->addAction(tr(names[i]), this, [this, i] { tabs_->setCurrentIndex(i); });
    a->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
  }
  view->addAction(log_->toggleViewAction());
  log_->toggleViewAction()->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
  view->addAction(jobsDock_->toggleViewAction());
  jobsDock_->toggleViewAction()->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_J));

  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About ckptdoc"), this, [this] {
    QMessageBox::about(
        this, tr("About ckptdoc"),
        tr("<b>ckptdoc</b> — checkpoint doctor<br>Inspects and repairs DeepSpeed ZeRO checkpoints: "
           "finds fp32 masters that disagree with the weights, broken optimizer state and "
           "missing ranks, and writes a verified repaired copy."));
  });
}

void MainWindow::rebuildRecentMenu() {
  recentMenu_->clear();
  const QStringList files = AppSettings().recentFiles();
  for (const auto& f : files) recentMenu_->addAction(f, this, [this, f] { openPath(f); });
  if (files.isEmpty()) recentMenu_->addAction(tr("(none)"))->setEnabled(false);
  recentMenu_->addSeparator();
  recentMenu_->addAction(tr("Clear list"), this, [this] {
    AppSettings().clearRecentFiles();
    rebuildRecentMenu();
  });
}

void MainWindow::openPath(const QString& path, bool quiet) {
  quietOpen_ = quiet;
  session_->open(path);
}

void MainWindow::reanalyse() {
  session_->analyse();
}

void MainWindow::compareWithLpWeights(const QString& path) {
  if (!session_->isOpen()) return;
  session_->core().set_lp_source(path.isEmpty() ? std::nullopt
                                                : std::optional<std::string>(path.toStdString()));
  statusBar()->showMessage(tr("Comparing the fp32 partitions with %1").arg(QFileInfo(path).fileName()),
                           10000);
  session_->analyse();
}

void MainWindow::cancelAnalysis() {
  if (auto j = session_->core().opening()) j->cancel();
  session_->cancelAnalysis();
}

void MainWindow::onAnalysisEnded() {
  progress_->hide();
  cancel_->hide();
}

void MainWindow::openDialog() {
  QFileDialog dialog(this,
                     tr("Open a checkpoint (DeepSpeed save folder, tag folder or rank file; PyTorch DCP, "
                        "Accelerate FSDP or Megatron-core folder)"));
  dialog.setFileMode(QFileDialog::Directory);
  dialog.setOption(QFileDialog::DontUseNativeDialog, true);  // lets the user pick folders and files alike
  dialog.setOption(QFileDialog::ShowDirsOnly, false);
  dialog.setNameFilter(tr("Checkpoints (*.pt *.bin latest);;All files (*)"));
  if (dialog.exec() != QDialog::Accepted || dialog.selectedFiles().isEmpty()) return;
  openPath(dialog.selectedFiles().first());
}

void MainWindow::compareDialog() {
  if (!session_->isOpen()) return;  // a storage map compares its weights (sources::open_diff_side)
  QFileDialog dialog(this, tr("Compare with (a checkpoint, Hugging Face folder or weights file)"));
  dialog.setFileMode(QFileDialog::Directory);
  dialog.setOption(QFileDialog::DontUseNativeDialog, true);  // folders and files alike, as in Open
  dialog.setOption(QFileDialog::ShowDirsOnly, false);
  dialog.setNameFilter(tr("Checkpoints and weights (*.pt *.bin *.safetensors latest);;All files (*)"));
  if (dialog.exec() != QDialog::Accepted || dialog.selectedFiles().isEmpty()) return;
  compareWith(dialog.selectedFiles().first());
}

void MainWindow::compareWith(const QString& other) {
  tabs_->setCurrentWidget(diff_);
  diff_->compareWith(other);
}

void MainWindow::attachDialog() {
  QFileDialog dialog(this, tr("Attach to a run: the folder its snapshots are written into"));
  dialog.setFileMode(QFileDialog::Directory);
  dialog.setOption(QFileDialog::ShowDirsOnly, true);
  dialog.setOption(QFileDialog::DontUseNativeDialog, true);
  if (dialog.exec() != QDialog::Accepted || dialog.selectedFiles().isEmpty()) return;
  attach(dialog.selectedFiles().first());
}

void MainWindow::attach(const QString& dir) {
  session_->attach(dir);
  detachAction_->setEnabled(true);
  tabs_->setCurrentWidget(timeline_);
}

void MainWindow::detach() {
  session_->detach();
}

void MainWindow::showAttachState() {
  if (!session_->isAttached()) return;
  const auto& samples = session_->samples();
  const QString dir = session_->attachedDir();
  if (samples.empty()) {
    timeline_->setNotice(tr("Attached to %1: waiting for a snapshot (one is read once its manifest.json is "
                            "written).")
                             .arg(dir),
                         false);
    return;
  }
  const auto& last = samples.back();
  timeline_->setNotice(
      tr("Attached to %1: %n snapshot(s); showing %2 (step %3).", "", static_cast<int>(samples.size()))
          .arg(dir, QString::fromStdString(last.snapshot.label))
          .arg(last.step),
      false);
}

void MainWindow::exportDialog() {
  if (!session_->sharedCatalog() && !session_->core().storage_source()) return;
  auto* d = new ExportDialog(session_, this);
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->open();
}

RepairDialog* MainWindow::openRepair(int row) {
  if (!session_->isOpen() || row < 0 || row >= findings_->count()) return nullptr;
  const auto& finding = findings_->finding(row);
  if (finding.repair == analysis::RepairKind::None) return nullptr;
  if (session_->core().repairing_source() || !session_->sharedCatalog()) {
    sourceRepairDialog(finding.repair);
    return nullptr;
  }
  RepairDialog* d = repairDialog(finding.repair);
  // A fix of several actions (a refresh that runs only with a reset of the optimizer) ticks them all.
  if (d) d->presetActions(repair::request_for(finding, *session_->catalog()));
  return d;
}

SourceRepairDialog* MainWindow::sourceRepairDialog(analysis::RepairKind kind) {
  const sources::Source* source = session_->core().repairing_source();
  if (!source || !source->can(sources::Command::Repair)) return nullptr;
  auto* d = new SourceRepairDialog(session_, kind, this);
  d->setAttribute(Qt::WA_DeleteOnClose);
  connect(d, &SourceRepairDialog::openRequested, this, [this](const QString& p) { openPath(p); });
  d->open();
  return d;
}

ConvertDialog* MainWindow::convertDialog() {
  if (!session_->isOpen()) return nullptr;
  auto* d = new ConvertDialog(session_, this);
  d->setAttribute(Qt::WA_DeleteOnClose);
  connect(d, &ConvertDialog::openRequested, this, [this](const QString& p) { openPath(p); });
  d->open();
  return d;
}

RepairDialog* MainWindow::repairDialog(analysis::RepairKind kind) {
  if (!session_->isOpen()) return nullptr;
  if (session_->core().repairing_source() || !session_->sharedCatalog()) {
    sourceRepairDialog(kind);
    return nullptr;
  }
  auto* d = new RepairDialog(session_, kind, this);
  d->setAttribute(Qt::WA_DeleteOnClose);
  connect(d, &RepairDialog::openRequested, this, [this](const QString& p) { openPath(p); });
  d->open();
  return d;
}

void MainWindow::showTab(const QString& name) {
  if (name == QStringLiteral("layout"))
    tabs_->setCurrentWidget(layout_);
  else if (name == QStringLiteral("params"))
    tabs_->setCurrentWidget(paramsView_);
  else if (name == QStringLiteral("diff"))
    tabs_->setCurrentWidget(diff_);
  else if (name == QStringLiteral("timeline"))
    tabs_->setCurrentWidget(timeline_);
  else if (name == QStringLiteral("storage"))
    tabs_->setCurrentWidget(storage_);
  else
    tabs_->setCurrentWidget(overview_);
}

void MainWindow::selectParamEverywhere(const QString& name) {
  if (syncing_) return;
  syncing_ = true;
  layout_->selectParam(name);
  paramsView_->selectParam(name);
  overview_->strip()->setSelectedParam(name);
  timeline_->selectParam(name);
  statusBar()->showMessage(name, 4000);
  syncing_ = false;
}

void MainWindow::closeEvent(QCloseEvent* e) {
  AppSettings().saveWindow(saveGeometry(), saveState());
  session_->cancelAnalysis();
  QMainWindow::closeEvent(e);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
  for (const auto& url : e->mimeData()->urls())
    if (url.isLocalFile()) {
      openPath(url.toLocalFile());
      e->acceptProposedAction();
      return;
    }
}

}  // namespace ckptdoc::gui
