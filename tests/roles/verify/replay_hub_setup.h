// What both replay-verification tests set their hub to: groups of two, short byte-level turns
// with search observations, every rollout replayed, and the same made-up questions; and what they
// both check of a worker the replays caught.
#pragma once
#include <gtest/gtest.h>

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

// A quarantined worker's session is refused with 403; `if_accepted` is the failure otherwise.
inline void expect_session_refused(hub::Hub& hub, const std::string& token,
                                   const char* if_accepted) {
  try {
    hub.access().authenticate(token);
    ADD_FAILURE() << if_accepted;
  } catch (const hub::RequestError& e) {
    EXPECT_EQ(e.status(), 403) << e.what();
  }
}

}  // namespace stoa::verify::testing
