#include "gui/app/main_window.h"

#include <QAbstractButton>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QResizeEvent>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QShortcut>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTableWidget>
#include <QVBoxLayout>
#include <functional>
#include <memory>

#include "engine/error.h"
#include "engine/trace.h"
#include "gui/app/settings_bar.h"
#include "gui/common/theme.h"
#include "gui/bnlab/page.h"
#include "gui/compare/page.h"
#include "gui/memory/page.h"
#include "gui/network/page.h"
#include "gui/intro/page.h"
#include "gui/iteration/page.h"
#include "gui/quiz/page.h"
#include "gui/ring/page.h"
#include "gui/runtime/engine_controller.h"
#include "gui/runtime/settings_store.h"
#include "gui/timeline/page.h"

namespace gui {

namespace {
constexpr int kWideNavigation = 178;          // icons and titles
constexpr int kCompactNavigation = 56;        // icons only
constexpr int kCompactNavigationWidth = 1200;  // windows narrower than this get the compact one
}  // namespace

QStringList MainWindow::pageIds() {
  return {QStringLiteral("intro"),    QStringLiteral("iteration"), QStringLiteral("bnlab"), QStringLiteral("timeline"),
          QStringLiteral("ring"),     QStringLiteral("compare"),   QStringLiteral("memory"), QStringLiteral("network"),
          QStringLiteral("quiz")};
}

MainWindow::MainWindow(AppContext* context, EngineController* engine, const Options& options, QWidget* parent)
    : QMainWindow(parent), context_(context), engine_(engine), options_(options) {
  setWindowTitle(tr("dpviz — DataParallel, step by step"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/dpviz.svg")));

  // Settings before the pages exist, so they start with the remembered ones.
  if (options_.persistent) {
    context_->setSettings(readSettings(QSettings(), context_->settings()));
  }
  requestedTheme_ = options_.theme;
  if (requestedTheme_.isEmpty()) {
    requestedTheme_ = options_.persistent ? QSettings().value(QStringLiteral("window/theme"), QStringLiteral("system")).toString()
                                          : QStringLiteral("light");
  }
  if (auto* app = qobject_cast<QApplication*>(QCoreApplication::instance())) context_->setTheme(applyTheme(*app, requestedTheme_));
  context_->setEngine(engine_);  // the engine follows the context's settings from here on

  auto* central = new QWidget(this);
  auto* outer = new QVBoxLayout(central);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->setSpacing(0);
  settingsBar_ = new SettingsBar(context_, central);
  outer->addWidget(settingsBar_);
  auto* body = new QHBoxLayout();
  body->setContentsMargins(0, 0, 0, 0);
  body->setSpacing(0);
  auto* navColumn = new QWidget(central);
  navColumn_ = navColumn;
  navColumn->setObjectName(QStringLiteral("navigationColumn"));
  navColumn->setFixedWidth(kWideNavigation);
  auto* navLayout = new QVBoxLayout(navColumn);
  navLayout->setContentsMargins(0, 0, 0, 0);
  navLayout->setSpacing(0);
  nav_ = new QListWidget(navColumn);
  nav_->setObjectName(QStringLiteral("navigation"));
  nav_->setIconSize(QSize(20, 20));
  nav_->setFrameShape(QFrame::NoFrame);
  nav_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);  // the compact column shows icons only
  navLayout->addWidget(nav_, 1);
  // The pages in order: intro, iteration, lab, timeline, quiz.
  next_ = new QPushButton(navColumn);
  next_->setObjectName(QStringLiteral("nextPage"));
  next_->setCursor(Qt::PointingHandCursor);
  navLayout->addWidget(next_);
  stack_ = new QStackedWidget(central);
  body->addWidget(navColumn);
  body->addWidget(stack_, 1);
  outer->addLayout(body, 1);
  setCentralWidget(central);

  addPage(QStringLiteral("intro"), tr("Introduction"), QStringLiteral("intro"), new IntroPage(context_));
  addPage(QStringLiteral("iteration"), tr("Iteration"), QStringLiteral("iteration"), new IterationPage(context_));
  addPage(QStringLiteral("bnlab"), tr("BatchNorm lab"), QStringLiteral("bnlab"), new BatchNormLabPage(context_));
  addPage(QStringLiteral("timeline"), tr("Timeline"), QStringLiteral("timeline"), new TimelinePage(context_));
  addPage(QStringLiteral("ring"), tr("Ring all-reduce"), QStringLiteral("ring"), new RingPage(context_));
  addPage(QStringLiteral("compare"), tr("DP vs DDP"), QStringLiteral("compare"), new ComparePage(context_));
  addPage(QStringLiteral("memory"), tr("Memory"), QStringLiteral("memory"), new MemoryPage(context_));
  addPage(QStringLiteral("network"), tr("Network"), QStringLiteral("network"), new NetworkPage(context_));
  addPage(QStringLiteral("quiz"), tr("Quiz"), QStringLiteral("quiz"), new QuizPage(context_));
  connect(nav_, &QListWidget::currentRowChanged, this, &MainWindow::onPageChanged);
  connect(next_, &QPushButton::clicked, this, [this] {
    const int index = static_cast<int>(order_.indexOf(currentPageId()));
    if (index >= 0 && index + 1 < order_.size()) showPage(order_[index + 1]);
  });
  // Keyboard focus goes back to the page after a setting is edited (Space and arrows step again).
  connect(settingsBar_, &SettingsBar::editingDone, this, [this] {
    if (Page* p = page(currentPageId())) p->setFocus(Qt::OtherFocusReason);
  });
  connect(context_, &AppContext::navigateRequested, this, &MainWindow::showPage);

  engineStatus_ = new QLabel(this);
  statusBar()->addPermanentWidget(engineStatus_);
  // A message (an engine error) is drawn left of the engine status: the status steps aside for it.
  connect(statusBar(), &QStatusBar::messageChanged, this, &MainWindow::updateEngineStatus);
  connect(context_, &AppContext::statusMessage, this, &MainWindow::onStatusMessage);
  if (engine_) {
    connect(engine_, &EngineController::iterationStarted, this, &MainWindow::updateEngineStatus);
    connect(engine_, &EngineController::stageRecorded, this, &MainWindow::updateEngineStatus);
    connect(engine_, &EngineController::settingsApplied, this, &MainWindow::updateEngineStatus);
  }
  updateEngineStatus();

  buildMenus();
  if (engine_) {
    connect(engine_, &EngineController::stageRecorded, this, &MainWindow::updateExportTrace);
    connect(engine_, &EngineController::settingsApplied, this, &MainWindow::updateExportTrace);
  }
  updateExportTrace();
  resize(1280, 800);
  showPage(QStringLiteral("intro"));
  restoreState();
  fitToScreen();
}

void MainWindow::fitToScreen() {
  // The default size, or one remembered from a larger screen, never exceeds the screen it opens on.
  const QScreen* s = screen();
  if (!s) return;
  const QSize available = s->availableGeometry().size();
  if (width() > available.width() || height() > available.height()) resize(size().boundedTo(available));
}

MainWindow::~MainWindow() {
  // Pages hold connections to the engine; stop it before they go.
  if (engine_) engine_->shutdown();
}

void MainWindow::addPage(const QString& id, const QString& title, const QString& icon, Page* page) {
  auto* item = new QListWidgetItem(QIcon(QStringLiteral(":/icons/%1.svg").arg(icon)), title, nav_);
  item->setData(Qt::UserRole, id);
  titles_.append(title);
  // A page whose content needs more room than the window has scrolls inside it, instead of making
  // the window larger than the screen (1024x640 is the smallest supported size).
  auto* scroll = new QScrollArea(stack_);
  scroll->setObjectName(QStringLiteral("pageScroll"));
  scroll->setWidget(page);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  stack_->addWidget(scroll);
  page->setPageId(id);
  pages_.insert(id, page);
  order_.append(id);
}

void MainWindow::setCompactNavigation(bool compact) {
  if (compact == compactNavigation_) return;
  compactNavigation_ = compact;
  navColumn_->setFixedWidth(compact ? kCompactNavigation : kWideNavigation);
  for (int i = 0; i < nav_->count(); ++i) {
    nav_->item(i)->setText(compact ? QString() : pageTitle(i));
    nav_->item(i)->setToolTip(compact ? pageTitle(i) : QString());
  }
  updateNextButton(stack_->currentIndex());
}

void MainWindow::resizeEvent(QResizeEvent* event) {
  QMainWindow::resizeEvent(event);
  setCompactNavigation(width() < kCompactNavigationWidth);
}

QString MainWindow::currentPageId() const { return order_.value(stack_->currentIndex()); }

void MainWindow::onPageChanged(int index) {
  stack_->setCurrentIndex(index);
  // Only the controls that act on the page shown: pages with their own hide the settings bar.
  const Page* shown = page(order_.value(index));
  settingsBar_->setVisible(!shown || shown->usesSettingsBar());
  // A status message belongs to the page that showed it; one left for this page appears now.
  statusBar()->clearMessage();
  if (const QString waiting = waitingStatus_.take(order_.value(index)); !waiting.isEmpty()) statusBar()->showMessage(waiting, 8000);
  updateNextButton(index);
}

void MainWindow::updateNextButton(int index) {
  const bool last = index < 0 || index + 1 >= order_.size();
  next_->setVisible(!last);
  if (!last) {
    next_->setText(compactNavigation_ ? QStringLiteral("→") : tr("Next: %1 →").arg(pageTitle(index + 1)));
    next_->setToolTip(tr("Next: %1").arg(pageTitle(index + 1)));
  }
}

void MainWindow::onStatusMessage(const QString& pageId, const QString& text) {
  if (pageId.isEmpty() || pageId == currentPageId()) {
    statusBar()->showMessage(text, 8000);
    return;
  }
  waitingStatus_.insert(pageId, text);  // a page in the background: its latest message waits for it
}

void MainWindow::updateExportTrace() {
  const bool any = engine_ && (!engine_->lastCompleted().isEmpty() || !engine_->events().isEmpty());
  exportTrace_->setEnabled(any);
  exportTrace_->setToolTip(any ? tr("The last iteration's stages as Chrome trace JSON")
                               : tr("Nothing to export yet: step through an iteration, or run one on the Timeline page"));
}

void MainWindow::showPage(const QString& id) {
  // The seed's sample program is run from the Introduction page.
  const QString page = id == QStringLiteral("sample") ? QStringLiteral("intro") : id;
  const int index = static_cast<int>(order_.indexOf(page));
  if (index >= 0) nav_->setCurrentRow(index);
}

void MainWindow::setTheme(const QString& requested) {
  requestedTheme_ = requested;
  if (auto* app = qobject_cast<QApplication*>(QCoreApplication::instance())) context_->setTheme(applyTheme(*app, requested));
  if (themeGroup_) {
    for (QAction* a : themeGroup_->actions()) a->setChecked(a->data().toString() == requested);
  }
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open trace (Chrome JSON)…"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open trace"), QString(), tr("Chrome trace (*.json)"));
    if (path.isEmpty()) return;
    auto* timeline = qobject_cast<TimelinePage*>(page(QStringLiteral("timeline")));
    if (!timeline) return void(QMessageBox::warning(this, tr("Open trace"), tr("The Timeline page is missing")));
    // Read off the GUI thread; the page shows the progress, Cancel, and any error.
    if (!timeline->openTrace(path)) QMessageBox::information(this, tr("Open trace"), tr("Another trace is still loading: cancel it first"));
    showPage(QStringLiteral("timeline"));
  });
  exportTrace_ = file->addAction(tr("Export &trace (Chrome JSON)…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export trace"), QStringLiteral("dpviz-trace.json"), tr("Chrome trace (*.json)"));
    if (path.isEmpty()) return;
    const QString error = exportTrace(path);
    if (!error.isEmpty()) QMessageBox::warning(this, tr("Export trace"), error);
    else statusBar()->showMessage(tr("Trace written to %1 (open it in Perfetto or chrome://tracing)").arg(path), 8000);
  });
  file->addAction(tr("Export &screenshot (PNG)…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export screenshot"), QStringLiteral("dpviz-%1.png").arg(currentPageId()), tr("PNG image (*.png)"));
    if (path.isEmpty()) return;
    const QString error = exportScreenshot(path);
    if (!error.isEmpty()) QMessageBox::warning(this, tr("Export screenshot"), error);
  });
#ifdef DPVIZ_HAVE_QUIZ
  file->addSeparator();
  file->addAction(tr("&Reset quiz progress…"), this, [this] {
    if (QMessageBox::question(this, tr("Reset quiz progress"), tr("Forget every answer given so far?")) != QMessageBox::Yes) return;
    if (auto* quiz = qobject_cast<QuizPage*>(page(QStringLiteral("quiz")))) quiz->resetProgress();
  });
#endif
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (int i = 0; i < order_.size(); ++i) {
    const QString id = order_[i];
    QAction* a = view->addAction(nav_->item(i)->icon(), pageTitle(i), this, [this, id] { showPage(id); });
    a->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
  }
  view->addSeparator();
  QMenu* themeMenu = view->addMenu(tr("&Theme"));
  themeGroup_ = new QActionGroup(this);
  const QList<QPair<QString, QString>> themes = {{QStringLiteral("light"), tr("Light")}, {QStringLiteral("dark"), tr("Dark")},
                                                 {QStringLiteral("system"), tr("Follow the system")}};
  for (const auto& [id, label] : themes) {
    QAction* a = themeMenu->addAction(label);
    a->setCheckable(true);
    a->setData(id);
    a->setChecked(id == requestedTheme_);
    themeGroup_->addAction(a);
    connect(a, &QAction::triggered, this, [this, id = id] { setTheme(id); });
  }

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&Keyboard shortcuts"), this, &MainWindow::showShortcuts)->setShortcut(QKeySequence::HelpContents);
  help->addAction(tr("&About dpviz"), this, &MainWindow::showAbout);
}

QString MainWindow::exportTrace(const QString& path) const {
  if (!engine_) return tr("The engine is not running.");
  const auto& events = engine_->lastCompleted().isEmpty() ? engine_->events() : engine_->lastCompleted();
  if (events.isEmpty()) return tr("No iteration has run yet: step through one on the Iteration page, or run one on the Timeline page.");
  try {
    dpv::TraceRecorder recorder;
    recorder.begin_iteration();
    for (const auto& e : events) recorder.on_stage(e);
    recorder.save(path.toStdString());
  } catch (const dpv::Error& e) {
    return QString::fromStdString(e.full());
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  return QString();
}

QString MainWindow::exportScreenshot(const QString& path) {
  QWidget* current = page(currentPageId());
  if (!current) return tr("No page is shown.");
  if (!current->grab().save(path, "PNG")) return tr("Could not write %1.").arg(path);
  return QString();
}

void MainWindow::updateEngineStatus() {
  if (!engine_) {
    engineStatus_->setText(tr("Engine: not running"));
    return;
  }
  const AppSettings& s = engine_->settings();
  QString text = tr("Engine: %1").arg(s.devices);
  if (engine_->hasIteration()) {
    const IterationInfo& info = engine_->info();
    const bool simulated = info.deviceSpec.startsWith(QLatin1String("cpu"));
    text = tr("Engine: %1 (%2 %3, %4)").arg(info.deviceSpec).arg(info.deviceLabels.size())
               .arg(simulated ? tr("simulated devices on CPU") : tr("GPU devices"), info.transport);
    if (!engine_->events().isEmpty()) {
      const auto& last = engine_->events().back();
      for (const auto& ev : engine_->events()) {
        if (ev.loss) text += tr(" · loss %1").arg(*ev.loss, 0, 'f', 4);
      }
      text += tr(" · last stage %1 ms").arg((last.t_end - last.t_start) * 1e3, 0, 'f', 3);
    }
  }
  // While a message shows, the engine status gives it room: its short form, or none at all (it
  // comes back when the message goes); the message is never drawn under it.
  const QString message = statusBar()->currentMessage();
  const int room = statusBar()->width() - statusBar()->fontMetrics().horizontalAdvance(message) - 48;
  const QString shortText = tr("Engine: %1").arg(s.devices);
  if (!message.isEmpty() && engineStatus_->fontMetrics().horizontalAdvance(text) > room) text = shortText;
  engineStatus_->setText(text);
  engineStatus_->setVisible(message.isEmpty() || engineStatus_->fontMetrics().horizontalAdvance(text) <= room);
}

QList<MainWindow::ShortcutEntry> MainWindow::shortcuts() const {
  QList<ShortcutEntry> out;
  auto plain = [](QString text) { return text.remove(QLatin1Char('&')).remove(QStringLiteral("…")).trimmed(); };
  // Menu actions, menu by menu.
  std::function<void(const QMenu*)> fromMenu = [&](const QMenu* menu) {
    for (QAction* a : menu->actions()) {
      if (a->menu()) fromMenu(a->menu());
      for (const QKeySequence& key : a->shortcuts())
        out.append({key.toString(QKeySequence::NativeText), plain(a->text()), tr("everywhere")});
    }
  };
  for (QAction* a : menuBar()->actions())
    if (a->menu()) fromMenu(a->menu());
  // Each page's own keys: QShortcuts (their whatsThis says what they do) and buttons with a key.
  for (int i = 0; i < order_.size(); ++i) {
    const Page* p = page(order_[i]);
    if (!p) continue;
    const QString where = pageTitle(i);
    for (const Page::Key& key : p->keys()) out.append({Page::keysText(key), key.what, where});
    for (const QShortcut* s : p->findChildren<QShortcut*>())
      out.append({s->key().toString(QKeySequence::NativeText), s->whatsThis().isEmpty() ? s->objectName() : s->whatsThis(), where});
    for (const QAbstractButton* b : p->findChildren<QAbstractButton*>()) {
      if (b->shortcut().isEmpty()) continue;
      out.append({b->shortcut().toString(QKeySequence::NativeText), plain(b->text()), where});
    }
  }
  return out;
}

void MainWindow::showShortcuts() {
  const std::unique_ptr<QDialog> dialog(createShortcutsDialog());
  dialog->exec();
}

QDialog* MainWindow::createShortcutsDialog() {
  auto* dialog = new QDialog(this);
  dialog->setWindowTitle(tr("Keyboard shortcuts"));
  auto* layout = new QVBoxLayout(dialog);
  const QList<ShortcutEntry> entries = shortcuts();
  auto* table = new QTableWidget(static_cast<int>(entries.size()), 3, dialog);
  table->setObjectName(QStringLiteral("shortcutTable"));
  table->setHorizontalHeaderLabels({tr("Keys"), tr("What it does"), tr("Where")});
  table->verticalHeader()->setVisible(false);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionMode(QAbstractItemView::NoSelection);
  for (int r = 0; r < entries.size(); ++r) {
    table->setItem(r, 0, new QTableWidgetItem(entries[r].keys));
    table->setItem(r, 1, new QTableWidgetItem(entries[r].what));
    table->setItem(r, 2, new QTableWidgetItem(entries[r].where));
  }
  table->resizeColumnsToContents();
  table->resizeRowsToContents();
  table->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(table);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, dialog);
  connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::reject);
  layout->addWidget(buttons);
  // The table whole where the screen has room: every column (the same keys do different things
  // on different pages, so "Where" must show) and every row, without scroll bars.
  const int frame = 2 * table->frameWidth();
  int width = frame + 24;  // the last column's breathing room
  for (int c = 0; c < table->columnCount(); ++c) width += table->horizontalHeader()->sectionSize(c);
  int height = frame + table->horizontalHeader()->sizeHint().height();
  for (int r = 0; r < table->rowCount(); ++r) height += table->rowHeight(r);
  const QSize room = screen() ? screen()->availableGeometry().size() * 0.9 : QSize(1024, 640);
  table->setMinimumSize(QSize(width, height).boundedTo(room - QSize(40, buttons->sizeHint().height() + 60)));
  dialog->adjustSize();
  return dialog;
}

void MainWindow::showAbout() {
  QMessageBox::about(this, tr("About dpviz"),
                     tr("<h3>dpviz %1</h3><p>Teaches PyTorch's <code>nn.DataParallel</code> by running it: scatter, "
                        "replicate, forward, gather, loss, backward, gradient reduce and the optimizer step, on real "
                        "(or simulated) devices, with every number coming from the engine.</p><p>Qt %2.</p>")
                         .arg(QStringLiteral(DPVIZ_VERSION), QString::fromLatin1(qVersion())));
}

void MainWindow::restoreState() {
  if (!options_.persistent) return;
  QSettings s;
  restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
  QMainWindow::restoreState(s.value(QStringLiteral("window/state")).toByteArray());
  const QString pageId = s.value(QStringLiteral("window/page")).toString();
  if (!pageId.isEmpty()) showPage(pageId);
}

void MainWindow::saveState() const {
  if (!options_.persistent) return;
  QSettings s;
  s.setValue(QStringLiteral("window/geometry"), saveGeometry());
  s.setValue(QStringLiteral("window/state"), QMainWindow::saveState());
  s.setValue(QStringLiteral("window/page"), currentPageId());
  s.setValue(QStringLiteral("window/theme"), requestedTheme_);
  writeSettings(s, context_->settings());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  saveState();
  if (engine_) engine_->shutdown();  // waits for the stage in progress, then the worker thread ends
  event->accept();
}

}  // namespace gui
