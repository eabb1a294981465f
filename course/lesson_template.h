#pragma once
// Lesson templates: Markdown whose run-specific sentences are written from the run's facts
// (course/lesson_facts.h), so a sentence that is false for this run is never shown.
//
//   {{name}}                               the fact's value (a number or a text)
//   {{#if name}} ... {{else}} ... {{/if}}  kept when the condition `name` holds (else the other part)
//   {{#unless name}} ... {{/unless}}       kept when it does not ({{else}} allowed too)
//
// Blocks nest. A line holding only block tags disappears whole (no blank line left behind), so a
// block may wrap whole paragraphs or list items. Every tag is checked, also inside a block that is
// not shown: an unknown name, a condition used as a value, a value used as a condition, an
// {{else}} or closing tag without its block, a block left open or an unclosed "{{" throws
// dpv::Error naming the lesson, the line and the placeholder; nothing fails silently.
#include <string>
#include <vector>

#include "course/lesson_facts.h"

namespace dpv::course {

// `text` is the lesson `lesson_id`'s template ("stages/reduce_grads", for the messages).
std::string render_lesson(const std::string& lesson_id, const std::string& text, const std::vector<NamedFact>& facts);
std::string render_lesson(const std::string& lesson_id, const std::string& text, const LessonFacts& facts);
// A lesson shown without a run (a topic page on its own): it must use no placeholder at all; one
// that does throws dpv::Error saying the lesson needs a run's facts.
std::string render_lesson_without_run(const std::string& lesson_id, const std::string& text);

}  // namespace dpv::course
