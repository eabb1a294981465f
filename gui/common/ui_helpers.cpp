#include "gui/common/ui_helpers.h"

#include <QLabel>
#include <QScrollArea>
#include <QVBoxLayout>

namespace gui {

QFrame* makeCard(QWidget* parent) {
  auto* card = new QFrame(parent);
  card->setObjectName(QStringLiteral("card"));
  card->setFrameShape(QFrame::NoFrame);
  return card;
}

QFrame* wrapInCard(const QString& title, QWidget* content, QWidget* parent) {
  QFrame* card = makeCard(parent);
  auto* layout = new QVBoxLayout(card);
  layout->setContentsMargins(12, 10, 12, 10);
  layout->setSpacing(6);
  auto* label = new QLabel(title, card);
  label->setObjectName(QStringLiteral("cardTitle"));
  layout->addWidget(label);
  content->setParent(card);
  layout->addWidget(content, 1);
  return card;
}

QLabel* makePageTitle(const QString& text, QWidget* parent) {
  auto* label = new QLabel(text, parent);
  label->setObjectName(QStringLiteral("pageTitle"));
  return label;
}

QVBoxLayout* makeScrollingPage(QWidget* page, QScrollArea*& scroll) {
  scroll = new QScrollArea(page);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* content = new QWidget(scroll);
  auto* layout = new QVBoxLayout(content);
  layout->setContentsMargins(12, 12, 12, 12);
  layout->setSpacing(6);
  scroll->setWidget(content);
  auto* outer = new QVBoxLayout(page);
  outer->setContentsMargins(0, 0, 0, 0);
  outer->addWidget(scroll);
  return layout;
}

}  // namespace gui
