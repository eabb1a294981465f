#pragma once
// The Introduction page: lessons/intro.md, and the source document's sample program runnable with
// one click on the chosen devices (SimpleModel, batch 32, lr 0.01, one step), showing what it prints.
#include "gui/common/page.h"

class QLabel;
class QPlainTextEdit;
class QPushButton;
class QTextBrowser;

namespace gui {

class IntroPage : public Page {
  Q_OBJECT
 public:
  IntroPage(AppContext* context, QWidget* parent = nullptr);
  QList<Shot> screenshots() override;
  void runSample();
  QString sampleOutput() const;
  bool sampleRunning() const { return pendingId_ != 0; }
  QTextBrowser* lessonView() const { return lesson_; }

 signals:
  void sampleDone(bool ok);

 private:
  void loadLesson();
  QTextBrowser* lesson_;
  QPushButton* run_;
  QLabel* runHint_;
  QPlainTextEdit* output_;
  quint64 pendingId_ = 0;
};

}  // namespace gui
