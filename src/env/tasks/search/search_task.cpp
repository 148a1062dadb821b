#include "env/tasks/search/search_task.h"

#include "core/error.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/retrieval_client.h"

namespace stoa::env {

SearchTask::SearchTask(const Retriever& retriever, int topk) : retriever_(retriever), topk_(topk) {
  STOA_CHECK(topk >= 1, ErrorKind::kInvalidArgument, "search task: topk must be >= 1, got ", topk);
}

SearchTask::SearchTask(std::unique_ptr<const Retriever> retriever, int topk)
    : owned_retriever_(std::move(retriever)), retriever_(*owned_retriever_), topk_(topk) {
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
    case ActionKind::kToolCall:
      result.tool = kSearchTool;
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

TaskKeys search_task_keys() {
  return {.accepted = {"index", "search_url", "topk"},
          .local = {"index", "search_url"},
          .paths = {"index"}};
}

std::unique_ptr<Task> make_search_task(const TaskOptions& options) {
  options.expect_only("search", search_task_keys().accepted);
  const std::string index = options.get("index"), url = options.get("search_url");
  STOA_CHECK(index.empty() != url.empty(), ErrorKind::kInvalidArgument,
             "task 'search': give exactly one of the options index (a BM25 index directory) "
             "and search_url (a retrieval server)");
  std::unique_ptr<const Retriever> retriever;
  if (!index.empty())
    retriever = std::make_unique<Bm25Index>(index);
  else
    retriever = std::make_unique<RetrievalClient>(url);
  return std::make_unique<SearchTask>(std::move(retriever), options.get_int("search", "topk", 3));
}

}  // namespace stoa::env
