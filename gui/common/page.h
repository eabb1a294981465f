#pragma once
// Base of every page in the main window's stack.
#include <QList>
#include <QString>
#include <QWidget>
#include <functional>
#include <memory>

namespace gui {

class AppContext;

class Page : public QWidget {
  Q_OBJECT
 public:
  Page(AppContext* context, QWidget* parent = nullptr) : QWidget(parent), context_(context) {}
  AppContext* context() const { return context_; }
  // The id the main window knows the page by ("iteration", "bnlab", ...; "" outside a window).
  QString pageId() const { return pageId_; }
  void setPageId(const QString& id) { pageId_ = id; }
  // A message in the status bar that belongs to this page (see AppContext::statusMessage).
  void showStatus(const QString& text);

  // States `dpviz --screenshot-all` renders: a file-name suffix ("" for the page as it is, or e.g.
  // "stage-03-forward") and a preparer that brings the page into that state and calls `done`
  // when it is ready to be grabbed (it may be asynchronous, e.g. after a few training steps).
  struct Shot {
    QString suffix;
    std::function<void(std::function<void()> done)> prepare;
  };
  virtual QList<Shot> screenshots() { return {Shot{QString(), [](std::function<void()> done) { done(); }}}; }
  // Whether the settings bar above the pages (devices, model, batch, ...) acts on this page; the
  // main window hides it on pages with controls of their own (the BatchNorm lab).
  virtual bool usesSettingsBar() const { return true; }

  // Keys the page handles while it has the keyboard focus (the quiz's A-D and Enter, the ring's
  // arrows): one table both dispatches them and is what Help > Keyboard shortcuts lists, so the
  // list cannot drift from what the keys do.
  struct Key {
    QList<QKeyCombination> keys;  // plain keys; the keypad's Enter counts as Enter
    QString what;                 // "select an answer (Enter confirms it)"
    std::function<void(int which)> action;  // `which`: the index in `keys` of the key pressed
  };
  const QList<Key>& keys() const { return keys_; }
  static QString keysText(const Key& key);  // "A, B, C, D, E, F" (native text)

 protected:
  void addKey(QList<QKeyCombination> keys, const QString& what, std::function<void(int which)> action);
  void keyPressEvent(QKeyEvent* event) override;  // runs the table's action, else QWidget's

 private:
  QList<Key> keys_;
  AppContext* context_;
  QString pageId_;
};

// For screenshot preparers that start a run: calls `ready` once, the first time `page` shows a
// result or fails (a page's resultShown() or failed(QString)), and drops both connections.
template <typename P>
void whenRunEnds(P* page, std::function<void()> ready) {
  auto fired = std::make_shared<bool>(false);
  auto connections = std::make_shared<QList<QMetaObject::Connection>>();
  auto finish = [ready = std::move(ready), fired, connections] {
    if (*fired) return;
    *fired = true;
    for (const auto& c : *connections) QObject::disconnect(c);
    ready();
  };
  *connections << QObject::connect(page, &P::resultShown, page, finish);
  *connections << QObject::connect(page, &P::failed, page, finish);
}

}  // namespace gui
