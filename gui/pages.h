#pragma once
// The pages of the main window, by id: "intro", "iteration", "bnlab", "timeline", "quiz".
// Each is a Page subclass declared in its own header:
//   intro_page.h       IntroPage(AppContext*, QWidget*)
//   iteration_page.h   IterationPage(AppContext*, QWidget*)
//   batchnorm_lab_page.h BatchNormLabPage(AppContext*, QWidget*)
//   timeline_page.h    TimelinePage(AppContext*, QWidget*)
//   quiz_page.h        QuizPage(AppContext*, QWidget*)
#include "gui/page.h"
