#pragma once
// `dpviz --screenshot-all DIR`: shows every page in each of its Page::screenshots() states and
// writes the window to DIR/NN-<page>[-<state>].png, then reports how it went.
#include <QObject>
#include <QStringList>
#include <QTimer>
#include <functional>

#include "gui/common/page.h"

namespace gui {

class MainWindow;

class ScreenshotRunner : public QObject {
  Q_OBJECT
 public:
  ScreenshotRunner(MainWindow* window, const QString& dir, QObject* parent = nullptr);
  // Starts; `finished(ok)` is emitted after the last picture (ok: every file written).
  void start();
  QStringList written() const { return written_; }
  QStringList problems() const { return problems_; }

 signals:
  void finished(bool ok);

 private:
  struct Job {
    QString pageId;
    Page::Shot shot;
  };
  void next();
  void capture(int token);
  MainWindow* window_;
  QString dir_;
  QList<Job> jobs_;
  int index_ = -1;
  int token_ = 0;  // invalidates a late `done` after a time-out
  QTimer watchdog_;
  QStringList written_;
  QStringList problems_;
};

}  // namespace gui
