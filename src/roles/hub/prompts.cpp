// The rendered prompts of the training items (Hub::render_prompt, prompt_tokens_locked): the
// task renders each once, the first time a lease needs it, and the hub keeps the tokens.
#include "env/episode.h"
#include "roles/hub/hub.h"

namespace stoa::hub {

std::vector<int32_t> Hub::render_prompt(int64_t prompt_index) const {
  env::EpisodeConfig ec;
  ec.max_turns = config_.sampling.max_turns;
  ec.max_observation_tokens = config_.sampling.max_observation_tokens;
  env::Episode ep(*deps_.task, deps_.prompts.at(static_cast<size_t>(prompt_index)), *deps_.codec,
                  ec);
  return ep.tokens();
}

const std::vector<int32_t>& Hub::prompt_tokens_locked(int64_t prompt_index, bool render_here) {
  auto it = prompt_cache_.find(prompt_index);
  if (it != prompt_cache_.end()) return it->second;
  if (!render_here) throw PromptNotRendered{prompt_index};
  return prompt_cache_[prompt_index] = render_prompt(prompt_index);
}

}  // namespace stoa::hub
