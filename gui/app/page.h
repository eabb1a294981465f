#pragma once
// Base of every page in the main window's stack.
#include <QList>
#include <QString>
#include <QWidget>
#include <functional>

namespace gui {

class AppContext;

class Page : public QWidget {
  Q_OBJECT
 public:
  Page(AppContext* context, QWidget* parent = nullptr) : QWidget(parent), context_(context) {}
  AppContext* context() const { return context_; }

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

 private:
  AppContext* context_;
};

}  // namespace gui
