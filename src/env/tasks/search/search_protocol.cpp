#include "env/tasks/search/search_protocol.h"

#include "env/answer_match.h"

namespace stoa::env {

const char* const kInvalidActionMessage =
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> "
    "and </search>. If I want to give the final answer, I should put the answer between <answer> "
    "and </answer>. Let me try again.\n";

const char* const kSearchTool = "search";

std::string search_r1_prompt(std::string_view question) {
  std::string q(strip_ascii(question));
  if (q.empty() || q.back() != '?') q.push_back('?');
  return "Answer the given question. You must conduct reasoning inside <think> and </think> first "
         "every time you get new information. After reasoning, if you find you lack some "
         "knowledge, you can call a search engine by <search> query </search> and it will return "
         "the top searched results between <information> and </information>. You can search as "
         "many times as your want. If you find no further external knowledge needed, you can "
         "directly provide the answer inside <answer> and </answer>, without detailed "
         "illustrations. For example, <answer> Beijing </answer>. Question: " +
         q + "\n";
}

Action parse_action(std::string_view text) {
  // Scan left to right for the first opening tag that has its own closing tag after it; this is
  // what the lazy regex does: at each start position it tries "search" then "answer".
  struct Tag {
    ActionKind kind;
    std::string_view open, close;
  };
  static constexpr Tag kTags[] = {{ActionKind::kToolCall, "<search>", "</search>"},
                                  {ActionKind::kAnswer, "<answer>", "</answer>"}};
  for (size_t pos = text.find('<'); pos != std::string_view::npos; pos = text.find('<', pos + 1)) {
    for (const Tag& tag : kTags) {
      if (text.compare(pos, tag.open.size(), tag.open) != 0) continue;
      size_t begin = pos + tag.open.size();
      size_t end = text.find(tag.close, begin);
      if (end == std::string_view::npos) continue;
      Action action;
      action.kind = tag.kind;
      action.content = std::string(strip_ascii(text.substr(begin, end - begin)));
      return action;
    }
  }
  return {};
}

const std::vector<std::string>& search_stop_strings() {
  static const std::vector<std::string> stops = {"</search>", "</answer>"};
  return stops;
}

size_t stop_position(std::string_view text) {
  size_t best = std::string_view::npos;
  for (const auto& stop : search_stop_strings()) {
    size_t at = text.find(stop);
    if (at != std::string_view::npos && (best == std::string_view::npos || at + stop.size() < best))
      best = at + stop.size();
  }
  return best;
}

std::string format_documents(const std::vector<RetrievedDoc>& docs) {
  std::string out;
  for (size_t i = 0; i < docs.size(); ++i) {
    std::string_view contents = docs[i].contents;
    size_t nl = contents.find('\n');
    std::string_view title = contents.substr(0, nl);
    std::string_view rest =
        nl == std::string_view::npos ? std::string_view() : contents.substr(nl + 1);
    out += "Doc " + std::to_string(i + 1) + "(Title: ";
    out += title;
    out += ") ";
    out += rest;
    out += "\n";
  }
  return out;
}

ObservationParts information_block(std::string_view formatted_docs) {
  return {"\n\n<information>", std::string(strip_ascii(formatted_docs)), "</information>\n\n"};
}

std::optional<std::string> last_answer(std::string_view response) {
  // re.finditer(r'<answer>(.*?)</answer>'): non-overlapping, left to right; keep the last.
  static constexpr std::string_view kOpen = "<answer>";
  static constexpr std::string_view kClose = "</answer>";
  std::optional<std::string> last;
  size_t pos = 0;
  while ((pos = response.find(kOpen, pos)) != std::string_view::npos) {
    size_t begin = pos + kOpen.size();
    size_t end = response.find(kClose, begin);
    if (end == std::string_view::npos) break;
    last = std::string(strip_ascii(response.substr(begin, end - begin)));
    pos = end + kClose.size();
  }
  return last;
}

double exact_match_reward(std::string_view response,
                          const std::vector<std::string>& golden_answers) {
  auto answer = last_answer(response);
  if (!answer) return 0.0;
  return exact_match(*answer, golden_answers) ? 1.0 : 0.0;
}

}  // namespace stoa::env
