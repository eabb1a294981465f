#pragma once
// Small widget helpers shared by the pages: cards with a title, page headers, a scrolling page.
#include <QFrame>
#include <QString>

class QLabel;
class QScrollArea;
class QVBoxLayout;

namespace gui {

// An empty rounded panel (QFrame#card in the style sheets).
QFrame* makeCard(QWidget* parent);
// A card holding `content` under a bold title.
QFrame* wrapInCard(const QString& title, QWidget* content, QWidget* parent);
// A large page title (QLabel#pageTitle).
QLabel* makePageTitle(const QString& text, QWidget* parent);
// Makes `page` one vertical scroll area (no frame, no horizontal bar: the content follows the
// width) and returns the layout of its content (12 px margins, 6 px spacing), for pages whose
// controls, charts and texts do not all fit a 1024x640 window. `scroll` receives the area.
QVBoxLayout* makeScrollingPage(QWidget* page, QScrollArea*& scroll);

}  // namespace gui
