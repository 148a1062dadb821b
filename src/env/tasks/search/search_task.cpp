#include "env/tasks/search/search_task.h"

#include "core/error.h"

namespace stoa::env {

SearchTask::SearchTask(const Retriever& retriever, int topk) : retriever_(retriever), topk_(topk) {
  STOA_CHECK(topk >= 1, ErrorKind::kInvalidArgument, "search task: topk must be >= 1, got ", topk);
}

std::string SearchTask::user_prompt(const QaItem& problem) const {
  return search_r1_prompt(problem.question);
}

const std::vector<std::string>& SearchTask::stop_strings() const {
  return search_stop_strings();
}

TurnResult SearchTask::on_turn(const QaItem&, std::string_view turn_text,
                               bool tools_allowed) const {
  Action action = parse_action(turn_text);
  TurnResult result;
  result.action = action.kind;
  result.content = action.content;
  switch (action.kind) {
    case ActionKind::kAnswer:
      result.done = true;
      break;
    case ActionKind::kSearch:
      // In the final turn Search-R1 runs no search and appends nothing.
      if (tools_allowed) {
        auto hits = retriever_.search({action.content}, topk_);
        result.observation = information_block(format_documents(hits.at(0)));
      }
      break;
    case ActionKind::kInvalid:
      if (tools_allowed) result.observation = {kInvalidActionMessage, "", ""};
      break;
  }
  return result;
}

double SearchTask::reward(std::string_view response_text,
                          const std::vector<std::string>& golden_answers) const {
  return exact_match_reward(response_text, golden_answers);
}

}  // namespace stoa::env
