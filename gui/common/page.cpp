#include "gui/common/page.h"

#include <QKeyEvent>
#include <QKeySequence>

#include "gui/common/context.h"

namespace gui {

void Page::showStatus(const QString& text) {
  if (context_) emit context_->statusMessage(pageId_, text);
}

void Page::addKey(QList<QKeyCombination> keys, const QString& what, std::function<void(int which)> action) {
  keys_.append(Key{std::move(keys), what, std::move(action)});
}

QString Page::keysText(const Key& key) {
  QStringList names;
  for (const QKeyCombination& k : key.keys) names << QKeySequence(k).toString(QKeySequence::NativeText);
  return names.join(QStringLiteral(", "));
}

void Page::keyPressEvent(QKeyEvent* event) {
  const QKeyCombination pressed(event->modifiers() & ~Qt::KeypadModifier, static_cast<Qt::Key>(event->key()));
  for (const Key& key : keys_)
    if (const qsizetype which = key.keys.indexOf(pressed); which >= 0) {
      key.action(static_cast<int>(which));
      event->accept();
      return;
    }
  QWidget::keyPressEvent(event);
}

}  // namespace gui
