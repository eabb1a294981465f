#include "gui/app/screenshot_runner.h"

#include <QDir>
#include <QImage>

#include "gui/app/main_window.h"

namespace gui {

namespace {
constexpr int kShotTimeoutMs = 60000;
constexpr int kSettleMs = 120;  // lets layouts and a last repaint settle before the grab
}  // namespace

ScreenshotRunner::ScreenshotRunner(MainWindow* window, const QString& dir, QObject* parent)
    : QObject(parent), window_(window), dir_(dir) {
  watchdog_.setSingleShot(true);
  watchdog_.setInterval(kShotTimeoutMs);
  connect(&watchdog_, &QTimer::timeout, this, [this] {
    problems_ << tr("%1: not ready after %2 s; captured as it was").arg(jobs_.value(index_).pageId).arg(kShotTimeoutMs / 1000);
    capture(token_);
  });
}

void ScreenshotRunner::start() {
  if (!QDir().mkpath(dir_)) {
    problems_ << tr("cannot create %1").arg(dir_);
    emit finished(false);
    return;
  }
  for (const QString& id : MainWindow::pageIds()) {
    Page* page = window_->page(id);
    if (!page) continue;
    for (const Page::Shot& shot : page->screenshots()) jobs_.append(Job{id, shot});
  }
  index_ = -1;
  next();
}

void ScreenshotRunner::next() {
  ++index_;
  if (index_ >= jobs_.size()) {
    emit finished(problems_.isEmpty());
    return;
  }
  const Job& job = jobs_[index_];
  window_->showPage(job.pageId);
  const int token = ++token_;
  watchdog_.start();
  job.shot.prepare([this, token] {
    // Grab after the event loop has drawn the new state.
    QTimer::singleShot(kSettleMs, this, [this, token] { capture(token); });
  });
}

void ScreenshotRunner::capture(int token) {
  if (token != token_) return;  // this shot was already captured (time-out, or `done` twice)
  ++token_;
  watchdog_.stop();
  const Job& job = jobs_[index_];
  const int pageNumber = static_cast<int>(MainWindow::pageIds().indexOf(job.pageId)) + 1;
  QString name = QStringLiteral("%1-%2").arg(pageNumber, 2, 10, QLatin1Char('0')).arg(job.pageId);
  if (!job.shot.suffix.isEmpty()) name += QLatin1Char('-') + job.shot.suffix;
  const QString path = QDir(dir_).filePath(name + QStringLiteral(".png"));
  const QImage image = window_->grab().toImage();
  if (image.isNull() || !image.save(path, "PNG")) {
    problems_ << tr("could not write %1").arg(path);
  } else {
    written_ << path;
  }
  QTimer::singleShot(0, this, &ScreenshotRunner::next);
}

}  // namespace gui
