#pragma once
// Lesson texts (Markdown) under lessons/, read at run time by the app's pages.
#include <string>
#include <vector>

namespace dpv::course {

// Reads lessons_dir/<id>.md, e.g. id "intro" or "stages/scatter". Throws dpv::Error naming the
// file when the id is not a plain relative name, or the file is missing, unreadable, empty or
// not valid UTF-8.
std::string load_lesson(const std::string& lessons_dir, const std::string& id);

// Every lesson the app expects: "intro", "stages/scatter", ..., "ddp/stages/construct", ...,
// "batchnorm-lab", "timeline", "ddp/sampler", ..., "zero/stages/gather_params", ..., "zero/overview", ...
const std::vector<std::string>& lesson_ids();
// Stage lesson ids in the order of the DataParallel plan ("scatter", ..., "step").
const std::vector<std::string>& stage_lesson_names();
// The DDP stages with a lesson "ddp/stages/<name>" (construct, sample, broadcast_buffers, forward,
// loss, backward, finalize, step: the dpv::stage_kind_name of DDP's plan).
const std::vector<std::string>& ddp_stage_lesson_names();

// DDP topic lessons under ddp/: "sampler", "buckets", "ring", "dp-vs-ddp", "faults".
const std::vector<std::string>& ddp_topic_lesson_names();

// The sharded strategies' stages with a lesson "zero/stages/<name>" (gather_params, free_params,
// backward, reduce_scatter, broadcast_params, step: the dpv::stage_kind_name of the stages ZeRO adds
// or changes; the others are DDP's own lessons).
const std::vector<std::string>& zero_stage_lesson_names();
// ZeRO and FSDP topic lessons under zero/: "overview", "zero1", "fsdp", "memory".
const std::vector<std::string>& zero_topic_lesson_names();
// The Network page's lessons (lessons/network/<name>.md), templates over a network lab point's facts
// (course/network_facts.h): "alpha-beta", "overlap", "compression".
const std::vector<std::string>& network_lesson_names();

// Tries to load every lesson of lesson_ids(); returns one message per lesson that fails.
std::vector<std::string> check_lessons(const std::string& lessons_dir);

// Empty when `bytes` is well-formed UTF-8, else what is wrong and at which byte.
std::string utf8_problem(const std::string& bytes);

}  // namespace dpv::course

namespace dpv::course {

// Where the lessons are, for a program whose executable lives in `exe_dir`: the folder named by
// the environment variable DPVIZ_LESSONS; else the first `share/dpviz/lessons` found beside the
// executable or up to three folders above it (an installed prefix: bin/../share/dpviz/lessons; a
// build tree, where CMake links build/share/dpviz/lessons to the sources). A folder counts when
// it holds intro.md. Throws dpv::Error listing the places tried and naming DPVIZ_LESSONS.
std::string find_lessons_dir(const std::string& exe_dir);

}  // namespace dpv::course
