// What both replay-verification tests set their hub to: groups of two, short byte-level turns
// with search observations, every rollout replayed, and the same made-up questions.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "env/dataset.h"
#include "roles/hub/hub.h"

namespace stoa::verify::testing {

inline void set_replay_test_hub(hub::HubConfig& hc) {
  hc.join_token = "join-secret";
  hc.group_size = 2;
  hc.max_staleness = 4;
  hc.max_tokens = 1024;
  hc.sampling.temperature = 1.0f;
  hc.sampling.max_new_tokens = 12;
  hc.sampling.max_turns = 2;
  hc.sampling.max_observation_tokens = 48;
  hc.verify.fraction = 1.0;  // every rollout
}

// The first `n` (at most 3) questions, all answered by the same made-up gene.
inline std::vector<env::QaItem> replay_test_prompts(size_t n) {
  const std::vector<std::pair<std::string, std::string>> questions = {
      {"q1", "Mutations in which gene cause Velor syndrome"},
      {"q2", "What treats Melvar fever"},
      {"q3", "Where is Tamorin expressed"}};
  std::vector<env::QaItem> items;
  for (size_t i = 0; i < n && i < questions.size(); ++i) {
    env::QaItem item;
    item.id = questions[i].first;
    item.question = questions[i].second;
    item.golden_answers = {"KRAV3"};
    item.split = "train";
    items.push_back(item);
  }
  return items;
}

}  // namespace stoa::verify::testing
