#include "gui/placeholder_page.h"

#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include "gui/app_context.h"
#include "gui/ui_helpers.h"

PlaceholderPage::PlaceholderPage(AppContext* context, const QString& title, const QString& description, QWidget* parent)
    : Page(context, parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(40, 40, 40, 40);
  auto* card = makeCard(this);
  auto* layout = new QVBoxLayout(card);
  layout->setContentsMargins(28, 24, 28, 24);
  layout->setSpacing(14);
  layout->addWidget(makePageTitle(title, card));
  auto* text = new QLabel(description, card);
  text->setWordWrap(true);
  text->setTextFormat(Qt::RichText);
  layout->addWidget(text);
  auto* note = new QLabel(tr("This page is not part of this build yet."), card);
  note->setObjectName(QStringLiteral("hintLabel"));
  layout->addWidget(note);
  auto* go = new QPushButton(tr("Meanwhile: step through an iteration →"), card);
  go->setObjectName(QStringLiteral("primary"));
  connect(go, &QPushButton::clicked, this, [this] { emit this->context()->navigateRequested(QStringLiteral("iteration")); });
  layout->addWidget(go, 0, Qt::AlignLeft);
  outer->addWidget(card);
  outer->addStretch(1);
}
