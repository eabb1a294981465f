#pragma once
// The facts of one network lab point (course/network_lab.h) that lessons/network/*.md are written
// (course/lessons.h network_lesson_names) are written from (course/lesson_template.h): the link, the measured and predicted step, the buckets, the
// alpha and beta parts of their all-reduces, and what the hook sent. Every number is the run's or
// the cost model's (engine/netmodel/link_model.h), formatted here once.
#include <vector>

#include "course/lesson_facts.h"
#include "course/network_lab.h"

namespace dpv::course {

// Throws dpv::Error (ValueError) for a point without a measured step.
std::vector<NamedFact> network_fact_table(const NetworkLabPoint& point);

}  // namespace dpv::course
