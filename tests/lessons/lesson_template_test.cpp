// The lesson template language (course/lesson_template.h): values, conditional blocks, nesting,
// lines of tags that vanish, and every malformed template failing loudly with the lesson's id
// and the placeholder.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "course/lesson_template.h"
#include "course_test_util.h"
#include "engine/error.h"

namespace dpv::course {
namespace {

std::vector<NamedFact> facts() {
  return {{"batch", int64_t{10}, ""},          {"chunks", std::string("3, 3, 3, 1"), ""},
          {"has_batchnorm", true, ""},         {"ddp", false, ""},
          {"idle", std::string(""), ""}};
}

std::string render(const std::string& text) { return render_lesson("stages/test", text, facts()); }

// The dpv::Error message of rendering `text` ("" when it renders).
std::string failure(const std::string& text) {
  try {
    render(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LessonTemplate, FillsValues) {
  EXPECT_EQ(render("A batch of {{batch}} becomes {{chunks}}."), "A batch of 10 becomes 3, 3, 3, 1.");
  EXPECT_EQ(render("no placeholders\n\nat all"), "no placeholders\n\nat all");
}

TEST(LessonTemplate, KeepsTheRightBranchOfIfAndUnless) {
  EXPECT_EQ(render("x{{#if has_batchnorm}} BN{{else}} plain{{/if}}."), "x BN.");
  EXPECT_EQ(render("x{{#if ddp}} DDP{{else}} DP{{/if}}."), "x DP.");
  EXPECT_EQ(render("x{{#unless ddp}} DP{{/unless}}."), "x DP.");
  EXPECT_EQ(render("x{{#unless has_batchnorm}} plain{{else}} BN{{/unless}}."), "x BN.");
}

TEST(LessonTemplate, NestsBlocks) {
  const std::string t = "{{#if has_batchnorm}}a{{#if ddp}}b{{else}}c{{#unless ddp}}d{{/unless}}{{/if}}e{{/if}}f";
  EXPECT_EQ(render(t), "acdef");
  EXPECT_EQ(render("{{#if ddp}}a{{#if has_batchnorm}}b{{/if}}c{{else}}z{{/if}}"), "z");
}

TEST(LessonTemplate, LinesOfOnlyTagsOrOfHiddenTextLeaveNoBlankLine) {
  EXPECT_EQ(render("one\n{{#if ddp}}\nhidden paragraph\n\n{{/if}}\ntwo"), "one\ntwo");
  EXPECT_EQ(render("one\n{{#if has_batchnorm}}\nshown\n{{/if}}\ntwo"), "one\nshown\ntwo");
  EXPECT_EQ(render("- a\n{{#if ddp}}- hidden item{{/if}}\n- b"), "- a\n- b");
  EXPECT_EQ(render("para\n\nnext"), "para\n\nnext");
  EXPECT_EQ(render("A sentence{{#if ddp}} that goes\non{{/if}} ends."), "A sentence\n ends.");
}

TEST(LessonTemplate, AnUnknownNameThrowsNamingTheLessonAndThePlaceholder) {
  const std::string e = failure("text {{batches}} more");
  EXPECT_NE(e.find("lesson 'stages/test'"), std::string::npos) << e;
  EXPECT_NE(e.find("{{batches}}"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown fact 'batches'"), std::string::npos) << e;
  // Also inside a block that is not shown: a typo never hides until the condition changes.
  EXPECT_NE(failure("{{#if ddp}}{{batchez}}{{/if}}").find("{{batchez}}"), std::string::npos);
  EXPECT_NE(failure("{{#if has_batchnrom}}x{{/if}}").find("{{#if has_batchnrom}}"), std::string::npos);
}

TEST(LessonTemplate, UnbalancedBlocksThrow) {
  EXPECT_NE(failure("{{#if ddp}}never closed").find("never closed"), std::string::npos);
  EXPECT_NE(failure("text{{/if}}").find("never opened"), std::string::npos);
  EXPECT_NE(failure("{{#if ddp}}x{{/unless}}").find("{{/unless}}"), std::string::npos);
  EXPECT_NE(failure("{{else}}").find("outside a block"), std::string::npos);
  EXPECT_NE(failure("{{#if ddp}}a{{else}}b{{else}}c{{/if}}").find("second {{else}}"), std::string::npos);
  EXPECT_NE(failure("half {{batch").find("without its '}}'"), std::string::npos);
  EXPECT_NE(failure("{{#each x}}").find("not a block tag"), std::string::npos);
  EXPECT_NE(failure("line 1\n{{#if ddp}}\nline 3").find("line 2"), std::string::npos);
}

TEST(LessonTemplate, ConditionsAndValuesAreNotInterchangeable) {
  EXPECT_NE(failure("{{#if batch}}x{{/if}}").find("'batch' is a value, not a condition"), std::string::npos);
  EXPECT_NE(failure("{{#unless chunks}}x{{/unless}}").find("not a condition"), std::string::npos);
  EXPECT_NE(failure("BN: {{has_batchnorm}}").find("is a condition"), std::string::npos);
}

TEST(LessonTemplate, WithoutARunOnlyPlainTextRenders) {
  EXPECT_EQ(render_lesson_without_run("ddp/ring", "plain\ntext"), "plain\ntext");
  try {
    render_lesson_without_run("ddp/sampler", "{{batch}}");
    ADD_FAILURE() << "a placeholder without a run must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a run's facts"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ddp/sampler"), std::string::npos) << e.what();
  }
}

TEST(LessonTemplate, EveryFactOfTheTableHasAUniqueName) {
  const std::vector<NamedFact> table = fact_table(LessonFacts{});
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_FALSE(table[i].meaning.empty()) << table[i].name;
    for (size_t j = i + 1; j < table.size(); ++j) EXPECT_NE(table[i].name, table[j].name);
  }
}

TEST(LessonTemplate, TheLessonsReadmeListsEveryFactWithItsKind) {
  std::ifstream in(testing::lessons_dir() + "/README.md");
  std::stringstream readme;
  readme << in.rdbuf();
  for (const NamedFact& f : fact_table(LessonFacts{})) {
    const std::string kind = std::holds_alternative<bool>(f.value) ? "condition" : "value";
    EXPECT_NE(readme.str().find("| `" + f.name + "` | " + kind + " |"), std::string::npos) << f.name << " (" << kind << ")";
  }
}

}  // namespace
}  // namespace dpv::course
