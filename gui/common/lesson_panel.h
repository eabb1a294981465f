#pragma once
// "What happens now": the stage's lesson (lessons/stages/<id>.md, a Markdown template rendered
// with this run's facts by course/lesson_template.h) followed by what the engine did in this very
// iteration (chunk sizes, bytes, time, loss). A missing lesson file, or one that does not render,
// is said plainly in the panel; the numbers and the rest of the page keep working.
#include <QTextBrowser>
#include <optional>
#include <QUrl>

#include "gui/runtime/engine_types.h"

namespace gui {

// Reads lessons/<id>.md ("intro", "stages/scatter"); on failure returns an empty string and
// puts the reason in `error`.
QString loadLessonMarkdown(const QString& lessonsDir, const QString& id, QString* error);
// The lesson id of a stage: "stages/<id>" for DataParallel, "ddp/stages/<id>" for DDP's ranks, and
// "zero/stages/<id>" for ZeRO's own stages (gather, free, reduce-scatter, broadcast, sharded step).
QString stageLessonPath(dpv::StrategyKind strategy, dpv::StageKind kind);
// Reads lessons/<id>.md and renders it with `facts` (none: a lesson shown without a run, which
// must have no placeholder); on failure returns an empty string and puts the reason in `error`.
QString renderLessonMarkdown(const QString& lessonsDir, const QString& id, const dpv::course::LessonFacts* facts,
                             QString* error);
// The chip roles a lesson link names: "chip:batch", "chip:params", "chip:activations",
// "chip:output", "chip:grads", "chip:optimizer" (empty for any other link).
// Links of the form "lesson:ddp/sampler" open that topic lesson in the panel.
QList<dpv::TensorRole> chipRolesForLink(const QUrl& url);

class LessonPanel : public QTextBrowser {
  Q_OBJECT
 public:
  explicit LessonPanel(QWidget* parent = nullptr);
  void setLessonsDir(const QString& dir) { lessonsDir_ = dir; }
  // event == nullptr: before the first stage (the plan is listed instead).
  void showStage(const IterationInfo& info, const dpv::StageEvent* event);
  void showMessage(const QString& markdown);
  // A topic lesson on its own (lessons/<id>.md, "ddp/ring"); a missing file is said plainly.
  // Opened from a stage by a "lesson:<id>" link, it starts with a link back to the stage and is
  // rendered with that stage's facts.
  void showLesson(const QString& id);
  QString lastMarkdown() const { return markdown_; }
  bool lessonMissing() const { return missing_; }

 signals:
  // The mouse is over a lesson link that names chips (empty: it left the link).
  void chipsHovered(const QList<dpv::TensorRole>& roles);

 private:
  void onLinkClicked(const QUrl& url);
  QString lessonsDir_;
  QString markdown_;
  QString stageMarkdown_;  // the stage text a "lesson:" link left, for its "back" link
  std::optional<dpv::course::LessonFacts> stageFacts_;  // the facts of the stage shown last
  bool missing_ = false;
};

}  // namespace gui
