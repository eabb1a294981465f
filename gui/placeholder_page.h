#pragma once
// Stands in for a page that is not built into this binary yet: it says what the page will hold
// and offers a way on, so the navigation never leads to a dead end.
#include "gui/page.h"

class PlaceholderPage : public Page {
  Q_OBJECT
 public:
  PlaceholderPage(AppContext* context, const QString& title, const QString& description, QWidget* parent = nullptr);
};
