#include "roles/hub/prompts/prompt_deck.h"

#include <numeric>
#include <utility>

#include "core/rng.h"
#include "env/episode.h"

namespace stoa::hub {

PromptDeck::PromptDeck(size_t count, uint64_t seed, Renderer render)
    : order_(count), render_(std::move(render)) {
  std::iota(order_.begin(), order_.end(), 0);
  Rng(seed, 0).shuffle(order_);
}

std::optional<int64_t> PromptDeck::next_fitting(
    int64_t max_tokens, const std::function<void(int64_t, int64_t)>& on_too_long) {
  const auto n = static_cast<int64_t>(order_.size());
  for (int64_t tries = 0; tries < n; ++tries) {
    const int64_t candidate = order_[static_cast<size_t>(cursor_ % n)];
    const auto length = static_cast<int64_t>(rendered(candidate).size());
    if (length < max_tokens) return candidate;
    on_too_long(candidate, length);
    ++cursor_;
  }
  return std::nullopt;
}

const std::vector<int32_t>& PromptDeck::rendered(int64_t prompt_index) const {
  auto it = tokens_.find(prompt_index);
  if (it == tokens_.end()) throw NotRendered{prompt_index};
  return it->second;
}

const std::vector<int32_t>& PromptDeck::render_here(int64_t prompt_index) {
  auto it = tokens_.find(prompt_index);
  if (it != tokens_.end()) return it->second;
  return tokens_[prompt_index] = render_(prompt_index);
}

void PromptDeck::keep(int64_t prompt_index, std::vector<int32_t> tokens) {
  tokens_.emplace(prompt_index, std::move(tokens));
}

std::vector<int32_t> render_training_prompt(const env::Task& task, const env::QaItem& item,
                                            const env::TokenCodec& codec,
                                            const net::SamplingParams& sampling) {
  env::EpisodeConfig ec;
  ec.max_turns = sampling.max_turns;
  ec.max_observation_tokens = sampling.max_observation_tokens;
  return env::Episode(task, item, codec, ec).tokens();
}

}  // namespace stoa::hub
