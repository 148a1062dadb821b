// The run's training prompts as the hub deals them out: a fixed shuffle of their indices (seeded,
// so every start of the run sees the same order), a cursor into it that the ledger keeps (a
// restarted hub continues where it stopped instead of replaying the first prompts), and each
// prompt's rendered tokens, kept once rendered. Rendering calls the task (an environment server
// for the http task, up to its timeout), so the deck never renders on its own where the caller
// holds a lock others wait on: rendered() throws NotRendered, the caller renders with render()
// outside its lock and hands the tokens back with keep(). Invariants: the order is a permutation
// of [0, size()); the cursor only grows (it counts prompts dealt or skipped, the order wraps
// around); a prompt's tokens never change once kept. Not thread-safe: the Hub calls it under its
// lock, except render(), which reads nothing that changes.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "env/dataset.h"
#include "env/task.h"
#include "env/token_codec.h"
#include "net/protocol.h"

namespace stoa::hub {

class PromptDeck {
 public:
  // The prompt at `prompt_index` is not rendered yet (rendered(), next_fitting()).
  struct NotRendered {
    int64_t prompt_index;
  };
  using Renderer = std::function<std::vector<int32_t>(int64_t prompt_index)>;

  // `count` prompts (the Hub refuses a run without any), shuffled by Rng(seed, 0): the same order
  // with every standard library (std::shuffle's algorithm is implementation-defined).
  PromptDeck(size_t count, uint64_t seed, Renderer render);

  size_t size() const { return order_.size(); }
  const std::vector<int64_t>& order() const { return order_; }
  // How many prompts were dealt or skipped so far (the ledger's `next_prompt`).
  int64_t cursor() const { return cursor_; }
  void restore_cursor(int64_t cursor) { cursor_ = cursor; }
  void advance() { ++cursor_; }

  // The next prompt, from the cursor on, whose rendering is shorter than `max_tokens`; a prompt
  // too long is reported to `on_too_long` (index, length) and skipped for good (the cursor moves
  // past it). The cursor stays at the prompt returned (advance() once it is dealt). nullopt when
  // every prompt was tried. Throws NotRendered, the cursor at that prompt, for one not rendered.
  std::optional<int64_t> next_fitting(int64_t max_tokens,
                                      const std::function<void(int64_t, int64_t)>& on_too_long);

  // The tokens of a prompt already rendered; throws NotRendered otherwise.
  const std::vector<int32_t>& rendered(int64_t prompt_index) const;
  // The tokens of a prompt, rendered here if they are not yet (a group restored by a restart:
  // the caller accepts the wait).
  const std::vector<int32_t>& render_here(int64_t prompt_index);
  // Renders a prompt without keeping it: safe outside the caller's lock.
  std::vector<int32_t> render(int64_t prompt_index) const { return render_(prompt_index); }
  // Keeps tokens rendered outside the lock (a prompt rendered meanwhile keeps its first tokens).
  void keep(int64_t prompt_index, std::vector<int32_t> tokens);
  bool is_rendered(int64_t prompt_index) const { return tokens_.count(prompt_index) > 0; }

 private:
  std::vector<int64_t> order_;
  int64_t cursor_ = 0;
  std::map<int64_t, std::vector<int32_t>> tokens_;
  Renderer render_;
};

// The hub's renderer: an episode of the run's task opened on `item` as a worker opens it (the
// run's turn and observation bounds), and its first tokens.
std::vector<int32_t> render_training_prompt(const env::Task& task, const env::QaItem& item,
                                            const env::TokenCodec& codec,
                                            const net::SamplingParams& sampling);

}  // namespace stoa::hub
