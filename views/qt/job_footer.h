#pragma once
// The lower part of a dialog that runs one session job writing a new folder (repair, convert): the job's
// stage and progress, its result in words, and Run / Open output / Close-or-Cancel buttons. The dialog keeps
// the job and says what happened; this keeps the widgets in step.
#include <QString>
#include <QWidget>
#include <string>

class QLabel;
class QProgressBar;
class QPushButton;

namespace ckptdoc::gui {

class JobFooter : public QWidget {
  Q_OBJECT
 public:
  struct Names {  // object names, for tests and scripts
    QString run, open, result;
  };
  JobFooter(const QString& runText, const QString& openText, const Names& names, QWidget* parent = nullptr);

  QPushButton* runButton() const { return run_; }
  QPushButton* openButton() const { return open_; }
  QPushButton* closeButton() const { return close_; }  // "Cancel" while the job runs

  void started();                                              // Run off, Cancel, progress from 0, no result
  void progressed(const std::string& stage, double fraction);  // fraction in [0, 1]
  void setStage(const QString& text);
  void ended();                                         // progress hidden, stage cleared, Close
  void showResult(const QString& html, bool openable);  // openable: the output exists to be opened

 private:
  QProgressBar* progress_;
  QLabel* stage_;
  QLabel* result_;
  QPushButton* run_;
  QPushButton* open_;
  QPushButton* close_;
};

}  // namespace ckptdoc::gui
