// The PaperSearchQA / Search-R1 search task: the Search-R1 prompt, <search> runs the retriever
// and shows the top-k documents inside <information>, <answer> ends the episode, anything else
// gets the invalid-action message; reward = exact match of the last answer.
#pragma once
#include "env/task.h"
#include "env/tasks/search/retriever.h"

namespace stoa::env {

class SearchTask final : public Task {
 public:
  // The retriever must outlive the task. topk = 3 as in Search-R1 training.
  explicit SearchTask(const Retriever& retriever, int topk = 3);

  std::string name() const override { return "search"; }
  std::string user_prompt(const QaItem& problem) const override;
  const std::vector<std::string>& stop_strings() const override;
  TurnResult on_turn(const QaItem& problem, std::string_view turn_text,
                     bool tools_allowed) const override;
  double reward(std::string_view response_text,
                const std::vector<std::string>& golden_answers) const override;

 private:
  const Retriever& retriever_;
  int topk_;
};

}  // namespace stoa::env
