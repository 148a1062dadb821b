// Scripted SFT demonstrations for the search task: deliberately imperfect transcripts in the
// exact Search-R1 protocol, built by driving a real Episode (so prompt, chat template, stop
// strings, observation rendering and truncation, and the loss mask are byte-identical to what a
// worker produces) with scripted turns instead of a model:
//
//   turn 1: "<think> ... </think>\n<search> QUERY </search>"  — a good query (the subject as the
//           question names it + the relation's keyword when the item records them, else the
//           question's own words) or, with probability 1 − good_query, a poor one (words of
//           another question)
//   the real retriever's observation (mask 0)
//   turn 2: "<think> ... </think>\n<answer> X </answer>"    — the golden answer when the
//           retrieved documents contain it (with probability answer_when_found), otherwise a
//           plausible wrong answer from the same category (a guess right with answer_when_missing)
//
// Why imperfect: a warm start that is already right on every training question leaves RL nothing
// to learn and teaches the model to trust any retrieval; the defaults aim a small model at
// roughly 25–35% pass@1 on validation after a short SFT (issue 8). Only TRAIN items are accepted:
// an item of any other split is refused, so validation/test can never leak into SFT data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "env/episode.h"
#include "env/task.h"
#include "env/token_codec.h"

namespace stoa::env {

struct DemoOptions {
  double good_query = 0.7;           // P(the search is a good query, see above)
  double answer_when_found = 0.75;   // P(correct answer | retrieved docs contain it)
  double answer_when_missing = 0.1;  // P(correct answer | they do not): a lucky guess
  uint64_t seed = 1;
  EpisodeConfig episode;  // the worker's episode settings (max_turns, observation budget)
};

struct Demonstration {
  std::string id;  // "demo-<question id>"
  std::vector<int32_t> tokens;
  std::vector<uint8_t> mask;  // 1: scripted model turns (trained on), 0: prompt, observations
  bool good_query = false;
  bool found = false;    // a golden answer was in the retrieved documents
  bool correct = false;  // the task's own reward is 1
};

struct DemoStats {
  int64_t demonstrations = 0;
  int64_t good_queries = 0;
  int64_t found = 0;
  int64_t correct = 0;
  int64_t tokens = 0;
  int64_t trained_tokens = 0;
};

// One demonstration per item, in order. Throws kInvalidArgument naming the item if any item is
// not from the train split (QaItem::split != "train") or has no golden answer.
std::vector<Demonstration> make_demonstrations(const std::vector<QaItem>& train, const Task& task,
                                               const TokenCodec& codec, const DemoOptions& options,
                                               DemoStats* stats = nullptr);

// The trainer's pre-tokenised SFT form (train/sft_data.h): {"id", "tokens", "mask"} per line.
void write_demonstrations_jsonl(const std::vector<Demonstration>& demos, const std::string& path);

}  // namespace stoa::env
