#pragma once
// Small widget helpers shared by the pages: cards with a title, page headers.
#include <QFrame>
#include <QString>

class QLabel;

namespace gui {

// An empty rounded panel (QFrame#card in the style sheets).
QFrame* makeCard(QWidget* parent);
// A card holding `content` under a bold title.
QFrame* wrapInCard(const QString& title, QWidget* content, QWidget* parent);
// A large page title (QLabel#pageTitle).
QLabel* makePageTitle(const QString& text, QWidget* parent);

}  // namespace gui
