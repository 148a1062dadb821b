// The one multi-turn rollout loop: env::Episodes (any env::Task) advanced together on the
// engine's BatchDecoder. Every step() is one forward pass carrying, for every running episode,
// its next decode token, its prompt's last token (a new episode) or its last sampled token plus
// a tool observation (a new turn): episodes join, leave and take tool turns without holding up
// the others. The worker (`stoa work`) and `stoa eval` run their episodes through it.
//
//   EpisodeRunner runner(model, codec, limits, hooks);
//   const int64_t prompt = runner.add_prompt(tokens);        // a group's prompt, computed once
//   runner.start(std::move(episode), prompt, sampling);      // per sample, whenever a slot is free
//   while (runner.running() > 0) runner.step();              // hooks see tokens, turns and ends
//
// A turn ends on a stop token (EOS), the task's stop string (Episode::stop_position on the turn's
// decoded text), or the turn's budget: min(max_new_tokens, the transcript budget left). The
// episode then takes the turn (Episode::step, which runs the tool); it ends when the task says
// so, when the transcript budget `max_tokens` is spent (kTruncated: the last turn is kept), or
// when the next turn would not fit the decoder's capacity (kOverflow). A turn cut by the capacity
// alone, before its budget, is not given to the episode (kOverflow): it has no stop.
//
// Weights may change between two step() calls (the worker's safe point): every token is drawn
// from the logits of one pass, so the caller tags it with the version current during that step.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "engine/batch_decoder.h"
#include "engine/sampler.h"
#include "env/episode.h"
#include "env/token_codec.h"

namespace stoa::episode {

struct RunnerLimits {
  int64_t slots = 4;                 // episodes decoded together
  int64_t capacity = 4096;           // tokens one episode's decode state may hold
  int64_t max_tokens = 0;            // transcript budget, prompt included (0: only the capacity)
  int64_t sample_vocab = 0;          // sample only ids below this (0: the whole vocabulary)
  std::vector<int32_t> stop_tokens;  // end a turn (EOS)
  bool preallocate = true;           // reserve each slot's whole capacity when it is filled
};

// How one episode samples.
struct EpisodeSampling {
  engine::SamplingParams params;
  uint64_t seed = 0;
  uint64_t stream = 0;
  int64_t max_new_tokens = 256;                       // per turn
  engine::DrawMode draw = engine::DrawMode::kStream;  // kPositional: replayable (the worker)
};

enum class EpisodeEnd {
  kDone,        // the task ended it (an answer, or the final turn)
  kTruncated,   // the transcript budget (max_tokens) is spent
  kOverflow,    // the next turn does not fit the decoder's capacity
  kTaskFailed,  // the task could not decide the turn (env::EnvironmentError): nothing to submit
};

struct FinishedEpisode {
  int64_t id = 0;
  std::unique_ptr<env::Episode> episode;
  env::Decision last;  // the task's decision on the last turn taken (none: default)
  EpisodeEnd end = EpisodeEnd::kDone;
  std::string failure;  // kTaskFailed: what the task said
  double tool_ms = 0;   // time spent in Episode::step (the task and its tools)
  // A pipeline group's rollout: its stages' signed commitments (none on one machine, or for
  // kTaskFailed, which is not submitted).
  PipelineProof proof;
};

struct RunnerHooks {
  // Every sampled token, in the step that drew it.
  std::function<void(int64_t id, const engine::SampledToken& token)> on_token;
  // After the episode took a turn (its tokens and the observation are in episode.tokens()).
  std::function<void(int64_t id, const env::Episode& episode, const env::Decision& decision)>
      on_turn;
  // An episode ended; its id is free for the next start().
  std::function<void(FinishedEpisode&& finished)> on_end;
};

class EpisodeRunner {
 public:
  // `model` and `codec` must outlive the runner; every episode's task and problem must outlive
  // the episode's end.
  EpisodeRunner(engine::EngineBackend& model, const env::TokenCodec& codec, RunnerLimits limits,
                RunnerHooks hooks);

  int64_t free_slots() const { return decoder_.free_slots(); }
  int64_t running() const { return running_; }

  // A prompt several episodes start from (a group's G samples): prefilled once, in the next step,
  // and forked by every start() that names it until drop_prompt.
  int64_t add_prompt(std::span<const int32_t> tokens);
  void drop_prompt(int64_t prompt);
  // Starts `episode` (fresh: its tokens are its prompt) on a free slot and returns its id. With
  // prompt >= 0 it forks that shared prompt, which must equal the episode's tokens; with -1 its
  // own prompt is prefilled in the next step. Throws kInvalidArgument when no slot is free.
  int64_t start(std::unique_ptr<env::Episode> episode, int64_t prompt,
                const EpisodeSampling& sampling);
  // Drops a running episode (no hook runs); its id is free at once.
  void cancel(int64_t id);
  // One forward pass over every running episode; runs the hooks.
  void step();

 private:
  struct Running {
    std::unique_ptr<env::Episode> episode;
    EpisodeSampling sampling;
    std::vector<int32_t> turn;  // this turn's sampled tokens
    int64_t turn_budget = 0;
    env::Decision last;
    double tool_ms = 0;
    std::string failure;
  };
  // The turn budget for an episode of `length` tokens: 0 when the transcript budget is spent.
  int64_t turn_budget(const Running& r) const;
  engine::GenerateOptions turn_options(const Running& r) const;
  // Handles one sampled token of episode `id`.
  void on_sampled(int64_t id, const engine::StepEvent& event);
  void end_turn(int64_t id, bool by_capacity);
  void finish(int64_t id, EpisodeEnd end);

  engine::BatchDecoder decoder_;
  const env::TokenCodec& codec_;
  RunnerLimits limits_;
  RunnerHooks hooks_;
  std::vector<Running> episodes_;  // by id (= decoder slot); empty episode: free
  int64_t running_ = 0;
};

}  // namespace stoa::episode
