// The PaperSearchQA / Search-R1 search task: the Search-R1 prompt, <search> runs the retriever
// and shows the top-k documents inside <information>, <answer> ends the episode, anything else
// gets the invalid-action message; reward = exact match of the last answer.
#pragma once
#include <memory>

#include "env/task.h"
#include "env/task_registry.h"
#include "env/tasks/search/retriever.h"

namespace stoa::env {

class SearchTask final : public Task {
 public:
  // The retriever must outlive the task. topk = 3 as in Search-R1 training.
  explicit SearchTask(const Retriever& retriever, int topk = 3);
  // The task owns its retriever (what the registry builds).
  explicit SearchTask(std::unique_ptr<const Retriever> retriever, int topk = 3);

  std::string name() const override { return "search"; }
  std::string user_prompt(const QaItem& problem) const override;
  const std::vector<std::string>& stop_strings() const override;
  TurnResult on_turn(const QaItem& problem, std::string_view turn_text,
                     bool tools_allowed) const override;
  double reward(std::string_view response_text,
                const std::vector<std::string>& golden_answers) const override;

 private:
  std::unique_ptr<const Retriever> owned_retriever_;  // null when the caller owns it
  const Retriever& retriever_;
  int topk_;
};

// The registry's factory for "search". Options: index (a BM25 index directory, `stoa search
// index`) or search_url (a Search-R1 retrieval server, `stoa search serve`) — exactly one — and
// topk (documents per search, default 3).
std::unique_ptr<Task> make_search_task(const TaskOptions& options);
// index and search_url say where this machine's retriever is (each machine its own); topk is the
// run's (it changes the observations, so the hub's replay must use the worker's value).
TaskKeys search_task_keys();

}  // namespace stoa::env
