#include "roles/episode/episode_runner.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "core/error.h"

namespace stoa::episode {

EpisodeRunner::EpisodeRunner(engine::EngineBackend& model, const env::TokenCodec& codec,
                             RunnerLimits limits, RunnerHooks hooks)
    : decoder_(model, limits.slots, limits.capacity),
      codec_(codec),
      limits_(std::move(limits)),
      hooks_(std::move(hooks)) {
  decoder_.set_sample_vocab(limits_.sample_vocab);
  decoder_.set_preallocate(limits_.preallocate);
  episodes_.resize(static_cast<size_t>(limits_.slots));
}

int64_t EpisodeRunner::add_prompt(std::span<const int32_t> tokens) {
  return decoder_.add_prefix(tokens);
}

void EpisodeRunner::drop_prompt(int64_t prompt) {
  decoder_.drop_prefix(prompt);
}

int64_t EpisodeRunner::turn_budget(const Running& r) const {
  if (limits_.max_tokens <= 0) return r.sampling.max_new_tokens;
  const int64_t room = limits_.max_tokens - static_cast<int64_t>(r.episode->tokens().size());
  return std::max<int64_t>(0, std::min(r.sampling.max_new_tokens, room));
}

engine::GenerateOptions EpisodeRunner::turn_options(const Running& r) const {
  engine::GenerateOptions o;
  o.max_tokens = r.turn_budget;
  o.sampling = r.sampling.params;
  o.seed = r.sampling.seed;
  o.stream = r.sampling.stream;
  o.draw = r.sampling.draw;
  o.stop_tokens = limits_.stop_tokens;
  return o;
}

int64_t EpisodeRunner::start(std::unique_ptr<env::Episode> episode, int64_t prompt,
                             const EpisodeSampling& sampling) {
  STOA_CHECK(episode != nullptr && !episode->done() && episode->turns() == 0,
             ErrorKind::kInvalidArgument, "an episode runner starts fresh episodes only");
  STOA_CHECK(sampling.max_new_tokens >= 1, ErrorKind::kInvalidArgument,
             "max_new_tokens must be >= 1, got ", sampling.max_new_tokens);
  Running r;
  r.episode = std::move(episode);
  r.sampling = sampling;
  r.turn_budget = turn_budget(r);
  STOA_CHECK(r.turn_budget >= 1, ErrorKind::kInvalidArgument, "a prompt of ",
             r.episode->tokens().size(), " tokens leaves no room under max_tokens ",
             limits_.max_tokens);
  const engine::GenerateOptions options = turn_options(r);
  const int64_t id = prompt >= 0 ? decoder_.start_from_prefix(prompt, options)
                                 : decoder_.start(r.episode->tokens(), options);
  episodes_[static_cast<size_t>(id)] = std::move(r);
  ++running_;
  return id;
}

void EpisodeRunner::cancel(int64_t id) {
  Running& r = episodes_.at(static_cast<size_t>(id));
  STOA_CHECK(r.episode != nullptr, ErrorKind::kInvalidArgument, "no episode ", id);
  decoder_.discard(id);
  r = Running{};
  --running_;
}

void EpisodeRunner::step() {
  for (const engine::StepEvent& e : decoder_.step()) on_sampled(e.slot, e);
}

void EpisodeRunner::on_sampled(int64_t id, const engine::StepEvent& event) {
  Running& r = episodes_[static_cast<size_t>(id)];
  if (hooks_.on_token) hooks_.on_token(id, event.sampled);
  r.turn.push_back(event.sampled.token);
  const bool budget = static_cast<int64_t>(r.turn.size()) >= r.turn_budget;
  const bool stop_string = r.episode->stop_position(codec_.decode(r.turn)) != std::string::npos;
  if (!(event.finished || stop_string)) return;
  if (!event.finished) decoder_.pause(id);
  end_turn(id, event.finished && !event.stopped && !budget && !stop_string);
}

void EpisodeRunner::end_turn(int64_t id, bool by_capacity) {
  Running& r = episodes_[static_cast<size_t>(id)];
  if (by_capacity) return finish(id, EpisodeEnd::kOverflow);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    r.last = r.episode->step(r.turn);
  } catch (const env::EnvironmentError& e) {
    // What the task stands on failed (its server, the hub serving it): this episode cannot go
    // on, the others can.
    r.failure = e.what();
    return finish(id, EpisodeEnd::kTaskFailed);
  }
  r.tool_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.turn.clear();
  if (hooks_.on_turn) hooks_.on_turn(id, *r.episode, r.last);
  if (r.last.done) return finish(id, EpisodeEnd::kDone);
  r.turn_budget = turn_budget(r);
  if (r.turn_budget <= 0) return finish(id, EpisodeEnd::kTruncated);
  // The last sampled token goes in with the observation.
  const engine::SequenceState& seq = decoder_.sequence(id);
  if (seq.length() + 1 + static_cast<int64_t>(r.last.appended.size()) >= seq.capacity())
    return finish(id, EpisodeEnd::kOverflow);
  decoder_.resume(id, r.last.appended, turn_options(r));
}

void EpisodeRunner::finish(int64_t id, EpisodeEnd end) {
  Running& r = episodes_[static_cast<size_t>(id)];
  FinishedEpisode f;
  f.id = id;
  f.episode = std::move(r.episode);
  f.last = std::move(r.last);
  f.end = end;
  f.tool_ms = r.tool_ms;
  f.failure = std::move(r.failure);
  if (end != EpisodeEnd::kTaskFailed) f.proof = decoder_.pipeline_proof(id);
  decoder_.discard(id);
  r = Running{};
  --running_;
  if (hooks_.on_end) hooks_.on_end(std::move(f));
}

}  // namespace stoa::episode
