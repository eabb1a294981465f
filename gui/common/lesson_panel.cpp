#include "gui/common/lesson_panel.h"

#include <QDesktopServices>
#include <QRegularExpression>
#include <utility>

#include "course/lesson_template.h"
#include "course/lessons.h"
#include "engine/error.h"

namespace gui {

QString loadLessonMarkdown(const QString& lessonsDir, const QString& id, QString* error) {
  try {
    return QString::fromStdString(dpv::course::load_lesson(lessonsDir.toStdString(), id.toStdString()));
  } catch (const dpv::Error& e) {
    if (error) *error = QString::fromStdString(e.what());
    return QString();
  }
}

QString renderLessonMarkdown(const QString& lessonsDir, const QString& id, const dpv::course::LessonFacts* facts,
                             QString* error) {
  try {
    const std::string lessonId = id.toStdString();
    const std::string text = dpv::course::load_lesson(lessonsDir.toStdString(), lessonId);
    return QString::fromStdString(facts ? dpv::course::render_lesson(lessonId, text, *facts)
                                        : dpv::course::render_lesson_without_run(lessonId, text));
  } catch (const dpv::Error& e) {
    if (error) *error = QString::fromStdString(e.what());
    return QString();
  }
}

QString stageLessonPath(dpv::StrategyKind strategy, dpv::StageKind kind) {
  using K = dpv::StageKind;
  // The sharded strategies' own stages, and their sharded step, have lessons of their own.
  const bool sharded = kind == K::GatherParams || kind == K::FreeParams || kind == K::ReduceScatter ||
                       kind == K::BroadcastParams || kind == K::Step;
  if (dpv::zero_stage(strategy) > 0 && sharded) return QStringLiteral("zero/stages/") + stageLessonId(kind);
  return (dpv::runs_ranks(strategy) ? QStringLiteral("ddp/stages/") : QStringLiteral("stages/")) + stageLessonId(kind);
}

QList<dpv::TensorRole> chipRolesForLink(const QUrl& url) {
  using R = dpv::TensorRole;
  if (url.scheme() != QLatin1String("chip")) return {};
  const QString what = url.path();
  if (what == QLatin1String("batch")) return {R::Input};
  if (what == QLatin1String("params")) return {R::Param};
  if (what == QLatin1String("activations")) return {R::Activation};
  if (what == QLatin1String("output")) return {R::Output};
  if (what == QLatin1String("grads")) return {R::Grad};
  if (what == QLatin1String("optimizer")) return {R::Optimizer};
  return {};
}

LessonPanel::LessonPanel(QWidget* parent) : QTextBrowser(parent) {
  // Links are handled here: chip links light the chips up, web links open in the browser.
  setOpenLinks(false);
  setFrameShape(QFrame::NoFrame);
  connect(this, &QTextBrowser::anchorClicked, this, &LessonPanel::onLinkClicked);
  connect(this, qOverload<const QUrl&>(&QTextBrowser::highlighted), this,
          [this](const QUrl& url) { emit chipsHovered(chipRolesForLink(url)); });
}

void LessonPanel::onLinkClicked(const QUrl& url) {
  if (url.scheme() == QLatin1String("chip")) {
    emit chipsHovered(chipRolesForLink(url));
    return;
  }
  if (url.scheme() == QLatin1String("lesson")) {
    const QString stage = markdown_;
    showLesson(url.path());
    markdown_ = tr("[← back to this stage](back:stage)\n\n") + markdown_;
    setMarkdown(markdown_);
    stageMarkdown_ = stage;
    return;
  }
  if (url.scheme() == QLatin1String("back")) {
    if (!stageMarkdown_.isEmpty()) showMessage(std::exchange(stageMarkdown_, QString()));
    return;
  }
  QDesktopServices::openUrl(url);
}

void LessonPanel::showMessage(const QString& markdown) {
  markdown_ = markdown;
  setMarkdown(markdown);
}

void LessonPanel::showLesson(const QString& id) {
  stageMarkdown_.clear();  // (the facts stay: a "lesson:" link renders its topic with them)
  QString error;
  const QString lesson = renderLessonMarkdown(lessonsDir_, id, stageFacts_ ? &*stageFacts_ : nullptr, &error);
  missing_ = lesson.isEmpty();
  if (missing_) {
    showMessage(tr("> **The lesson text is missing** (%1). The rest of the page still works.").arg(error.toHtmlEscaped()));
    return;
  }
  // The lesson's "# Title" drawn as the stage lessons' "### " headings: a side panel, not a page.
  static const QRegularExpression heading(QStringLiteral("^#{1,2} "), QRegularExpression::MultilineOption);
  showMessage(lesson.trimmed().replace(heading, QStringLiteral("### ")));
}

void LessonPanel::showStage(const IterationInfo& info, const dpv::StageEvent* event) {
  missing_ = false;
  stageMarkdown_.clear();
  stageFacts_.reset();
  QString md;
  if (!event && info.ddp) {
    md += tr("### Before the first stage (%2)\n\nOne process per device, each running the "
             "same script on its own share of the data set (%1 samples). Press **Step** (→) to run the first stage, "
             "or **Play** (Space) to watch the whole iteration.\n\n")
              .arg(info.batchRows)
              .arg(QString::fromLatin1(dpv::strategy_name(info.strategy)));
  } else if (!event) {
    md += tr("### Before the first stage\n\nYour program made the batch %1 and its labels on the host, and "
             "`.cuda()` copied both to GPU 0, where `model.cuda()` put the module: see GPU 0's chips and memory. "
             "Press **Step** (→) to run the first stage of `model(inputs)`, or **Play** (Space) to watch the whole "
             "iteration.\n\n")
              .arg(info.inputShape);
  }
  if (!event) {
    md += tr("**This iteration's plan** (%1 stages):\n\n").arg(info.plan.size());
    QString last;
    for (const auto& stage : info.plan) {
      const QString title = stageShortTitle(stage.kind);
      if (title == last) continue;  // one line for the Forward and Backward runs of layers
      last = title;
      md += QStringLiteral("1. %1\n").arg(title);
    }
    showMessage(md);
    return;
  }
  const QString id = stageLessonPath(info.strategy, event->stage.kind);
  stageFacts_ = dpv::course::lesson_facts_after(info.lessonFacts, *event);
  QString error;
  const QString lesson = renderLessonMarkdown(lessonsDir_, id, &*stageFacts_, &error);
  if (lesson.isEmpty()) {
    missing_ = true;
    md += tr("### %1\n\n> **The lesson text for this stage is missing or cannot be shown** (%2). The animation, "
             "the code and the numbers below still show what happened.\n\n")
              .arg(stageShortTitle(event->stage.kind), error.toHtmlEscaped());
  } else {
    md += lesson.trimmed() + QStringLiteral("\n\n");
  }
  // The DDP stages that have a topic lesson of their own link to it.
  if (info.ddp && event->stage.kind == dpv::StageKind::Sample)
    md += tr("[More: the sampler](lesson:ddp/sampler)\n\n");
  if (info.ddp && event->stage.kind == dpv::StageKind::Backward)
    md += tr("[More: gradient buckets](lesson:ddp/buckets)\n\n");
  md += QStringLiteral("---\n\n");
  md += tr("**In this run — %1**\n\n").arg(QString::fromStdString(event->stage.title));
  if (!event->summary.empty()) md += QString::fromStdString(event->summary) + QStringLiteral("\n\n");
  QStringList chunks;
  for (int64_t c : event->chunk_sizes) chunks << QString::number(c);
  if (!chunks.isEmpty()) md += tr("- chunk sizes: [%1]\n").arg(chunks.join(QStringLiteral(", ")));
  md += tr("- stage time: %1 ms\n").arg((event->t_end - event->t_start) * 1e3, 0, 'f', 3);
  if (event->bytes_moved > 0) md += tr("- bytes moved: %1\n").arg(formatBytes(static_cast<double>(event->bytes_moved)));
  for (const auto& c : event->collectives) {
    md += tr("- %1 over %2 devices: %3, algbw %4 GB/s, busbw %5 GB/s\n")
              .arg(QString::fromLatin1(dpv::collective_op_name(c.op)))
              .arg(c.ranks)
              .arg(formatBytes(static_cast<double>(c.bytes)))
              .arg(c.algbw, 0, 'f', 2)
              .arg(c.busbw, 0, 'f', 2);
  }
  if (event->loss) md += tr("- loss: %1\n").arg(*event->loss, 0, 'f', 4);
  if (info.ddp && event->stage.kind == dpv::StageKind::Loss) {
    QStringList losses;
    for (const auto& r : event->ranks)
      if (r.loss) losses << tr("rank %1: %2").arg(r.rank).arg(*r.loss, 0, 'f', 4);
    if (!losses.isEmpty()) md += tr("- each rank's own loss: %1 (rank 0 prints the first)\n").arg(losses.join(QStringLiteral(", ")));
  }
  if (info.ddp) {
    for (const auto& c : event->comm) {
      if (c.device != 0) continue;
      md += tr("- rank 0, bucket %1 (%2): launched at %3 ms, all-reduce %4 → %5 ms\n")
                .arg(c.bucket)
                .arg(formatBytes(static_cast<double>(c.bytes)))
                .arg(c.t_launch * 1e3, 0, 'f', 3)
                .arg(c.t_start * 1e3, 0, 'f', 3)
                .arg(c.t_end * 1e3, 0, 'f', 3);
    }
  }
  showMessage(md);
}

}  // namespace gui
