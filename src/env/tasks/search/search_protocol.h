// The Search-R1 / PaperSearchQA agent protocol, text level: the prompt, the stop strings, the
// first-match action parser, the observation and invalid-action strings, the document rendering,
// and the answer extraction used for the reward. These strings are a protocol shared with models
// trained elsewhere: they are reproduced byte for byte from Search-R1 (scripts/data_process/
// nq_search.py and search_r1/llm_agent/generation.py), typos included ("as your want").
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "env/strip_ascii.h"
#include "env/task.h"

namespace stoa::env {

// The user message for a question: the fixed instruction, then "Question: {q}\n" where q is the
// question stripped of surrounding whitespace with "?" appended if it does not end with one.
std::string search_r1_prompt(std::string_view question);

// Shown after a generation that contains neither a complete <search> nor <answer> action.
extern const char* const kInvalidActionMessage;

// The name of the protocol's one tool (TurnResult::tool of a <search> turn).
extern const char* const kSearchTool;

// A <search> is the protocol's tool call (ActionKind::kToolCall), an <answer> its final answer.
struct Action {
  ActionKind kind = ActionKind::kInvalid;
  std::string content;  // stripped text between the tags (empty for kInvalid)
};

// re.search(r'<(search|answer)>(.*?)</\1>', text, re.DOTALL): the first complete action wins,
// whatever follows it. Tags are case-sensitive, as in Search-R1.
Action parse_action(std::string_view text);

// Where generation must stop: the end of the first "</search>" or "</answer>" in text, or npos
// when neither occurs. (Search-R1 post-processes whole generations and prefers </search>; a
// streaming engine stops at whichever closing tag comes first, which is what this returns.)
size_t stop_position(std::string_view text);
const std::vector<std::string>& search_stop_strings();

// One retrieved document: contents are "Title\nbody" as in the Search-R1 corpus.
struct RetrievedDoc {
  std::string id;
  std::string contents;
  double score = 0;
};

// "Doc {i}(Title: {first line}) {rest}\n" for i = 1.., exactly like Search-R1's _passages2string
// (the rest keeps its inner newlines).
std::string format_documents(const std::vector<RetrievedDoc>& docs);

// "\n\n<information>" + docs.strip() + "</information>\n\n", split in its three parts so that the
// caller may truncate only the middle one.
ObservationParts information_block(std::string_view formatted_docs);

// The content of the LAST complete <answer>...</answer> in a response (stripped), or nullopt.
// The response is the model's side of the transcript (everything after the prompt): the prompt's
// own "<answer> Beijing </answer>" example is therefore never mistaken for an answer.
std::optional<std::string> last_answer(std::string_view response);

// Exact-match reward of a response: 1 when its last answer matches a golden answer, else 0.
double exact_match_reward(std::string_view response,
                          const std::vector<std::string>& golden_answers);

}  // namespace stoa::env
