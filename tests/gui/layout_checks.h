#pragma once
// Checks of what a learner reads on screen, for the layout tests: text drawn smaller than 9 pt,
// text items that overlap each other, and labels elided or cut. Each violation is one line naming
// the widget (or scene item) and its text, so a failure says what to fix.
#include <QAbstractButton>
#include <QAbstractItemView>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QGraphicsView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QStatusBar>
#include <QStyleOptionComboBox>
#include <QTabBar>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextEdit>
#include <qcustomplot.h>

#include "gui/common/scene_items.h"

namespace gui::layout {

// The smallest text a learner should have to read: 9 pt at the widget's logical DPI, in pixels.
inline qreal minimumTextPx(const QWidget* w) { return 9.0 * w->logicalDpiY() / 72.0; }

inline qreal pixelSizeOf(const QFont& f, const QWidget* w) {
  return f.pixelSize() > 0 ? f.pixelSize() : f.pointSizeF() * w->logicalDpiY() / 72.0;
}

// "QLabel#hintLabel in IterationPage" : enough to find it in the code.
inline QString describe(const QWidget* w) {
  QString name = QString::fromLatin1(w->metaObject()->className());
  if (!w->objectName().isEmpty()) name += QLatin1Char('#') + w->objectName();
  for (const QWidget* p = w->parentWidget(); p; p = p->parentWidget()) {
    if (QString::fromLatin1(p->metaObject()->className()).endsWith(QLatin1String("Page"))) {
      name += QStringLiteral(" in ") + QString::fromLatin1(p->metaObject()->className());
      break;
    }
  }
  return name;
}

inline QString plainText(QString text) { return text.remove(QLatin1Char('&')).simplified(); }

// A widget a learner sees now: shown, with some of it inside its window.
inline bool onScreen(const QWidget* w) {
  if (!w->isVisible() || w->width() <= 0 || w->height() <= 0) return false;
  if (w->isWindow()) return true;
  const QWidget* window = w->window();
  QRect shown(w->mapTo(window, QPoint(0, 0)), w->size());
  for (const QWidget* p = w->parentWidget(); p && p != window; p = p->parentWidget())
    shown &= QRect(p->mapTo(window, QPoint(0, 0)), p->size());  // clipped by scroll areas and splitters
  return !shown.intersected(window->rect()).isEmpty();
}

inline QString widgetText(const QWidget* w) {
  if (auto* l = qobject_cast<const QLabel*>(w)) return l->text();
  if (auto* b = qobject_cast<const QAbstractButton*>(w)) return plainText(b->text());
  if (auto* c = qobject_cast<const QComboBox*>(w)) return c->currentText();
  if (auto* e = qobject_cast<const QLineEdit*>(w)) return e->text();
  if (auto* t = qobject_cast<const QTabBar*>(w)) return t->count() > 0 ? plainText(t->tabText(0)) : QString();
  if (auto* p = qobject_cast<const QPlainTextEdit*>(w)) return p->toPlainText().left(40);
  if (auto* t = qobject_cast<const QTextEdit*>(w)) return t->toPlainText().left(40);
  if (qobject_cast<const QAbstractItemView*>(w) || qobject_cast<const QAbstractSpinBox*>(w)) return QStringLiteral("(items)");
  return QString();
}

// Widgets whose text is drawn smaller than 9 pt; QCustomPlot charts by their axes, legend and titles.
inline QStringList smallWidgetText(QWidget* root) {
  QStringList out;
  const qreal minPx = minimumTextPx(root) - 0.01;
  auto check = [&](const QWidget* w, const QFont& f, const QString& what) {
    const qreal px = pixelSizeOf(f, w);
    if (px < minPx) out << QStringLiteral("%1 \"%2\": text %3 px < %4 px (9 pt)").arg(describe(w), what).arg(px, 0, 'f', 1).arg(minPx, 0, 'f', 1);
  };
  for (QWidget* w : root->findChildren<QWidget*>()) {
    if (!onScreen(w)) continue;
    if (auto* plot = qobject_cast<QCustomPlot*>(w)) {
      for (QCPAxisRect* rect : plot->axisRects())
        for (QCPAxis* axis : rect->axes()) {
          if (!axis->visible()) continue;
          if (axis->tickLabels()) check(w, axis->tickLabelFont(), QStringLiteral("tick labels of ") + axis->label());
          if (!axis->label().isEmpty()) check(w, axis->labelFont(), axis->label());
        }
      if (plot->legend && plot->legend->visible()) check(w, plot->legend->font(), QStringLiteral("legend"));
      for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
        if (auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i))) check(w, title->font(), title->text());
      continue;
    }
    const QString text = widgetText(w);
    if (text.isEmpty()) continue;
    if (auto* l = qobject_cast<QLabel*>(w); l && Qt::mightBeRichText(l->text())) {
      // Rich text: the smallest font its document uses (a <small> or a font-size in the markup).
      QTextDocument doc;
      doc.setDefaultFont(l->font());
      doc.setHtml(l->text());
      for (QTextBlock b = doc.begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it)
          if (it.fragment().isValid()) check(w, it.fragment().charFormat().font(), it.fragment().text().left(40));
      continue;
    }
    check(w, w->font(), text.left(60));
  }
  return out;
}

// Labels, buttons, tabs and combo boxes whose text needs more room than they have, or that show
// an elided text ("…").
inline QStringList cutWidgetText(QWidget* root) {
  QStringList out;
  auto cut = [&](const QWidget* w, const QString& text, int needed, int has) {
    out << QStringLiteral("%1 \"%2\": needs %3 px, has %4").arg(describe(w), text.left(80)).arg(needed).arg(has);
  };
  for (QWidget* w : root->findChildren<QWidget*>()) {
    if (!onScreen(w)) continue;
    if (auto* l = qobject_cast<QLabel*>(w)) {
      const QString text = l->text();
      if (text.isEmpty() || l->pixmap().isNull() == false) continue;
      if (text.endsWith(QChar(0x2026)) || text.endsWith(QLatin1String("...")))
        out << QStringLiteral("%1 \"%2\": elided").arg(describe(w), text.left(80));
      const int room = l->contentsRect().width() - 2 * std::max(0, l->margin()) - std::max(0, l->indent());
      if (l->wordWrap() || Qt::mightBeRichText(text)) {
        if (l->hasHeightForWidth() && l->heightForWidth(l->width()) > l->height() + 1)
          out << QStringLiteral("%1 \"%2\": needs %3 px of height, has %4").arg(describe(w), plainText(text).left(80)).arg(l->heightForWidth(l->width())).arg(l->height());
        continue;
      }
      int needed = 0;
      for (const QString& line : text.split(QLatin1Char('\n'))) needed = std::max(needed, l->fontMetrics().horizontalAdvance(line));
      if (needed > room + 1) cut(w, text, needed, room);
    } else if (auto* b = qobject_cast<QAbstractButton*>(w)) {
      const QString text = plainText(b->text());
      if (text.isEmpty()) continue;
      const int icon = b->icon().isNull() ? 0 : b->iconSize().width() + 4;
      const int needed = b->fontMetrics().horizontalAdvance(text) + icon + 6;
      if (needed > b->width()) cut(w, text, needed, b->width());
    } else if (auto* t = qobject_cast<QTabBar*>(w)) {
      for (int i = 0; i < t->count(); ++i) {
        if (!t->isTabVisible(i)) continue;
        const QRect r = t->tabRect(i);
        const int needed = t->fontMetrics().horizontalAdvance(plainText(t->tabText(i))) + 8;
        if (r.width() < needed || !t->rect().contains(r) || t->sizeHint().width() > t->width())
          out << QStringLiteral("%1 tab \"%2\": cut or scrolled out (needs %3 px, tab %4 px, bar %5 of %6)")
                     .arg(describe(w), plainText(t->tabText(i))).arg(needed).arg(r.width()).arg(t->width()).arg(t->sizeHint().width());
      }
    } else if (auto* c = qobject_cast<QComboBox*>(w)) {
      QStyleOptionComboBox option;
      option.initFrom(c);
      const QRect field = c->style()->subControlRect(QStyle::CC_ComboBox, &option, QStyle::SC_ComboBoxEditField, c);
      const int needed = c->fontMetrics().horizontalAdvance(c->currentText());
      if (needed > field.width()) cut(w, c->currentText(), needed, field.width());
    }
  }
  return out;
}

// Sibling labels and buttons (children of one widget) whose rectangles intersect.
inline QStringList overlappingWidgets(QWidget* root) {
  QStringList out;
  QList<QWidget*> parents = root->findChildren<QWidget*>();
  parents.prepend(root);
  for (QWidget* parent : parents) {
    if (!onScreen(parent)) continue;
    QList<QWidget*> texts;
    for (QWidget* child : parent->findChildren<QWidget*>(Qt::FindDirectChildrenOnly))
      if (onScreen(child) && (qobject_cast<QLabel*>(child) || qobject_cast<QAbstractButton*>(child)) && !widgetText(child).isEmpty())
        texts << child;
    for (int i = 0; i < texts.size(); ++i)
      for (int j = i + 1; j < texts.size(); ++j) {
        const QRect common = texts[i]->geometry().intersected(texts[j]->geometry());
        if (common.width() > 1 && common.height() > 1)
          out << QStringLiteral("%1 \"%2\" overlaps %3 \"%4\"").arg(describe(texts[i]), widgetText(texts[i]).left(50), describe(texts[j]), widgetText(texts[j]).left(50));
      }
  }
  return out;
}

// One piece of scene text in scene coordinates, with its size on screen.
struct SceneText {
  QString text;
  QRectF rect;
  qreal screenPx;
  bool elided;
};

// The text a view's scene shows (painted first, so the items' records are current).
inline QList<SceneText> sceneTexts(QGraphicsView* view) {
  QList<SceneText> out;
  view->viewport()->grab();  // paints every item at the view's scale
  const qreal viewScale = view->transform().m11();
  const QRectF shown = view->mapToScene(view->viewport()->rect()).boundingRect();
  for (QGraphicsItem* item : view->scene()->items()) {
    if (!item->isVisible() || item->effectiveOpacity() < 0.05 || !shown.intersects(item->sceneBoundingRect())) continue;
    const qreal scale = viewScale * item->sceneTransform().m11();
    if (auto* t = dynamic_cast<QGraphicsSimpleTextItem*>(item)) {
      if (t->text().isEmpty()) continue;
      out << SceneText{t->text(), t->sceneBoundingRect(), pixelSizeOf(t->font(), view) * scale, t->text().endsWith(QChar(0x2026))};
      continue;
    }
    if (auto* t = dynamic_cast<QGraphicsTextItem*>(item)) {
      out << SceneText{t->toPlainText(), t->sceneBoundingRect(), pixelSizeOf(t->font(), view) * scale, false};
      continue;
    }
    QList<DrawnLabel> labels;
    if (auto* i = dynamic_cast<ChipItem*>(item)) labels = i->drawnLabels();
    else if (auto* i = dynamic_cast<DeviceBox*>(item)) labels = i->drawnLabels();
    else if (auto* i = dynamic_cast<HostBox*>(item)) labels = i->drawnLabels();
    else if (auto* i = dynamic_cast<InfoCard*>(item)) labels = i->drawnLabels();
    for (const DrawnLabel& l : labels) out << SceneText{l.text, item->mapRectToScene(l.rect), l.pixelSize * scale, l.elided};
  }
  return out;
}

// Scene text smaller than 9 pt on screen, elided, or overlapping other scene text.
inline QStringList sceneTextProblems(QGraphicsView* view) {
  QStringList out;
  const qreal minPx = minimumTextPx(view) - 0.25;  // rounding of pixel sizes
  const QList<SceneText> texts = sceneTexts(view);
  const QString where = QString::fromLatin1(view->scene()->metaObject()->className());
  for (const SceneText& t : texts) {
    if (t.screenPx < minPx) out << QStringLiteral("%1 text \"%2\": %3 px on screen < %4 px (9 pt)").arg(where, t.text.left(60)).arg(t.screenPx, 0, 'f', 1).arg(minPx + 0.25, 0, 'f', 1);
    if (t.elided) out << QStringLiteral("%1 text \"%2\": elided").arg(where, t.text.left(60));
  }
  for (int i = 0; i < texts.size(); ++i)
    for (int j = i + 1; j < texts.size(); ++j) {
      const QRectF common = texts[i].rect.intersected(texts[j].rect);
      if (common.width() > 1 && common.height() > 1)
        out << QStringLiteral("%1 text \"%2\" overlaps \"%3\"").arg(where, texts[i].text.left(50), texts[j].text.left(50));
    }
  return out;
}

// The status bar's message is drawn left of its permanent widgets (the engine status): flagged
// when it needs more room than is left there.
inline QStringList cutStatusMessage(QWidget* window) {
  QStringList out;
  for (QStatusBar* bar : window->findChildren<QStatusBar*>()) {
    if (!onScreen(bar) || bar->currentMessage().isEmpty()) continue;
    int right = bar->width();
    for (QWidget* child : bar->findChildren<QWidget*>(Qt::FindDirectChildrenOnly))
      if (onScreen(child) && child->x() > bar->width() / 3) right = std::min(right, child->x());
    const int needed = bar->fontMetrics().horizontalAdvance(bar->currentMessage()) + 8;
    if (needed > right)
      out << QStringLiteral("QStatusBar message \"%1\": needs %2 px, has %3 before the permanent widgets").arg(bar->currentMessage().left(80)).arg(needed).arg(right);
  }
  return out;
}

// Every problem of the window as shown now: its widgets and the scenes of its visible views.
inline QStringList readabilityProblems(QWidget* window) {
  QStringList out = smallWidgetText(window) + cutWidgetText(window) + overlappingWidgets(window) + cutStatusMessage(window);
  for (QGraphicsView* view : window->findChildren<QGraphicsView*>())
    if (onScreen(view) && view->scene()) out += sceneTextProblems(view);
  return out;
}

}  // namespace gui::layout
