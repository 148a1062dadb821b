// The Search-R1 protocol strings and parsers, table-driven over tricky transcripts.
#include <gtest/gtest.h>

#include "env/tasks/search/search_protocol.h"

namespace stoa::env {
namespace {

TEST(SearchPrompt, MatchesSearchR1ByteForByte) {
  const std::string expected =
      "Answer the given question. You must conduct reasoning inside <think> and </think> first "
      "every time you get new information. After reasoning, if you find you lack some knowledge, "
      "you can call a search engine by <search> query </search> and it will return the top "
      "searched results between <information> and </information>. You can search as many times "
      "as your want. If you find no further external knowledge needed, you can directly provide "
      "the answer inside <answer> and </answer>, without detailed illustrations. For example, "
      "<answer> Beijing </answer>. Question: What gene causes Velor syndrome?\n";
  EXPECT_EQ(search_r1_prompt("What gene causes Velor syndrome?"), expected);
  // Stripped, "?" appended when missing, never doubled.
  EXPECT_EQ(search_r1_prompt("  \tWhat gene causes Velor syndrome \n"), expected);
  EXPECT_EQ(search_r1_prompt("What gene causes Velor syndrome"), expected);
  EXPECT_EQ(search_r1_prompt("").substr(search_r1_prompt("").size() - 12), "Question: ?\n");
}

TEST(SearchPrompt, InvalidActionMessageIsExact) {
  EXPECT_STREQ(kInvalidActionMessage,
               "\nMy previous action is invalid. If I want to search, I should put the query "
               "between <search> and </search>. If I want to give the final answer, I should put "
               "the answer between <answer> and </answer>. Let me try again.\n");
}

struct ParseCase {
  const char* text;
  ActionKind kind;
  const char* content;
};

TEST(ParseAction, TableOfTrickyTranscripts) {
  const ParseCase cases[] = {
      {"<think>x</think><search> velor gene </search>", ActionKind::kToolCall, "velor gene"},
      {"<answer>  BRCA1 \n</answer>", ActionKind::kAnswer, "BRCA1"},
      {"no tags at all", ActionKind::kInvalid, ""},
      {"", ActionKind::kInvalid, ""},
      // Unclosed search; the later complete answer wins.
      {"<search> foo <answer>bar</answer>", ActionKind::kAnswer, "bar"},
      // Unclosed everything.
      {"<search> foo", ActionKind::kInvalid, ""},
      {"<answer> foo </search>", ActionKind::kInvalid, ""},
      // First complete action wins even if another follows.
      {"<search>a</search><answer>b</answer>", ActionKind::kToolCall, "a"},
      {"<answer>b</answer><search>a</search>", ActionKind::kAnswer, "b"},
      // Nested: the outer <search> closes at the first </search>.
      {"<search>x <search>y</search> z</search>", ActionKind::kToolCall, "x <search>y"},
      // Answer inside search text still belongs to the search (lazy match to first </search>).
      {"<search>q <answer>a</answer></search>", ActionKind::kToolCall, "q <answer>a</answer>"},
      // Mismatched pair is not an action; the regex backreference needs the same name.
      {"<search>q</answer>", ActionKind::kInvalid, ""},
      // Case-sensitive tags.
      {"<SEARCH>q</SEARCH>", ActionKind::kInvalid, ""},
      {"<Answer>q</Answer><answer>r</answer>", ActionKind::kAnswer, "r"},
      // Newlines inside (DOTALL) and empty content.
      {"<search>\nmulti\nline\n</search>", ActionKind::kToolCall, "multi\nline"},
      {"<answer></answer>", ActionKind::kAnswer, ""},
      // Tags with spaces are not tags.
      {"< search>q</search>", ActionKind::kInvalid, ""},
      {"<search >q</search>", ActionKind::kInvalid, ""},
      // Multiple answers: the first is the action (the reward uses the last, see below).
      {"<answer>a</answer> <answer>b</answer>", ActionKind::kAnswer, "a"},
      // A stray '<' before the real tag.
      {"a < b <<search>q</search>", ActionKind::kToolCall, "q"},
  };
  for (const auto& c : cases) {
    Action a = parse_action(c.text);
    EXPECT_EQ(a.kind, c.kind) << c.text;
    EXPECT_EQ(a.content, c.content) << c.text;
  }
}

TEST(StopPosition, FirstClosingTagOfEitherKind) {
  EXPECT_EQ(stop_position("abc"), std::string::npos);
  EXPECT_EQ(stop_position("<search>q</search> more"), std::string("<search>q</search>").size());
  EXPECT_EQ(stop_position("<answer>a</answer><search>q</search>"),
            std::string("<answer>a</answer>").size());
  EXPECT_EQ(stop_position("</search"), std::string::npos);  // incomplete stop string
}

TEST(FormatDocuments, SearchR1PassagesToString) {
  std::vector<RetrievedDoc> docs = {{"1", "Title one\nBody one.", 2.0},
                                    {"2", "Title two\nLine a\nLine b", 1.0},
                                    {"3", "Only a title", 0.5},
                                    {"4", "", 0.1}};
  EXPECT_EQ(format_documents(docs),
            "Doc 1(Title: Title one) Body one.\n"
            "Doc 2(Title: Title two) Line a\nLine b\n"
            "Doc 3(Title: Only a title) \n"
            "Doc 4(Title: ) \n");
  EXPECT_EQ(format_documents({}), "");
}

TEST(InformationBlock, StripsDocsAndWraps) {
  auto block = information_block("Doc 1(Title: T) b\n");
  EXPECT_EQ(block.joined(), "\n\n<information>Doc 1(Title: T) b</information>\n\n");
  EXPECT_EQ(information_block("").joined(), "\n\n<information></information>\n\n");
}

TEST(LastAnswer, TakesTheLastCompleteAnswer) {
  EXPECT_EQ(last_answer("<answer>a</answer> then <answer> b </answer>"), "b");
  EXPECT_EQ(last_answer("<answer>a</answer> then <answer> unclosed"), "a");
  EXPECT_FALSE(last_answer("nothing").has_value());
  EXPECT_FALSE(last_answer("<answer>unclosed").has_value());
  EXPECT_EQ(last_answer("<answer><answer>x</answer>"), "<answer>x");
}

struct RewardCase {
  const char* response;
  std::vector<std::string> golden;
  double reward;
};

TEST(ExactMatchReward, Table) {
  const RewardCase cases[] = {
      {"<answer>Borvex</answer>", {"borvex"}, 1},
      {"<think>..</think><answer> The Borvex. </answer>", {"Borvex"}, 1},
      {"<answer>wrong</answer> <answer>Borvex</answer>", {"Borvex"}, 1},
      {"<answer>Borvex</answer> <answer>wrong</answer>", {"Borvex"}, 0},
      {"Borvex", {"Borvex"}, 0},  // no answer tag
      {"<answer>tior mite</answer>", {"Giia tokralica", "tior mite"}, 1},
      {"<answer>12 h</answer>", {"12 hours", "12 h"}, 1},
      {"<answer>12</answer>", {"12 hours", "12 h"}, 0},
      {"<answer>“MITU9”</answer>", {"MITU9"}, 1},
      {"<answer></answer>", {"x"}, 0},
      // Search-R1 semantics: a lone article normalises to "", equal to an empty golden answer.
      {"<answer>a</answer>", {""}, 1},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(exact_match_reward(c.response, c.golden), c.reward) << c.response;
  }
}

}  // namespace
}  // namespace stoa::env
