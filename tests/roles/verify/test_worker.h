// A test worker for replay verification: generates a lease's G rollouts through the worker's own
// EpisodeRunner (a shared prompt forked per sample, positional draws from the lease's seeds, the
// worker's PULSE-state-to-engine path, an optional in-flight switch to a second version after a
// number of steps) and records them as the worker does (RolloutRecord). The attacks are applied to
// what it generates or to the weights it generates with (adversarial mode).
#pragma once
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "env/episode.h"
#include "kernels/targets.h"
#include "net/protocol.h"
#include "pulse/int8_state.h"
#include "roles/episode/episode_runner.h"
#include "roles/episode/topk_row.h"
#include "roles/worker/engine_update.h"
#include "roles/worker/rollout_record.h"

namespace stoa::verify::testing {

enum class Attack {
  kNone,
  kForgedLogprob,      // one behaviour log-prob changed by one ulp
  kCherryPick,         // the most likely other token instead of the sampled one
  kWrongVersion,       // generated with version 1, labelled version 2
  kWeightOffByOne,     // one int8 weight value off by one
  kForgedObservation,  // one token of a tool observation changed
};

inline worker::WeightUpdate full_update(const pulse::Int8State& state) {
  worker::WeightUpdate u;
  u.version = state.version();
  u.full = true;
  for (const auto& [name, t] : state.tensors()) u.tensors.emplace_back(name, t);
  return u;
}

// `state` with one int8 value of its first int8 tensor moved by one (towards zero at the edge).
inline pulse::Int8State off_by_one(const pulse::Int8State& state) {
  pulse::Int8State out = state;
  pulse::StateEditor editor(out);
  for (const auto& [name, t] : state.tensors()) {
    if (t.kind != pulse::TensorKind::kInt8) continue;
    int8_t& v = editor.tensor(name).q.values[7];
    v = v == 127 ? 126 : static_cast<int8_t>(v + 1);
    editor.rehash(name);
    break;
  }
  return out;
}

struct GenerateSettings {
  const ModelConfig* config = nullptr;
  const env::Task* task = nullptr;
  const env::TokenCodec* codec = nullptr;
  int64_t max_tokens = 2048;
  int64_t sample_vocab = 256;
  int32_t eos = -1;
  int32_t topk = 0;  // top-K rows recorded as the worker records them (0: none)
};

// Generates the lease's rollouts. `first` is the state generation starts with (labelled with its
// version, or `label` when set); after `switch_after` steps (< 0: never) the engine switches to
// `second` in place, as the worker's safe point does.
inline std::vector<net::RolloutSubmission> generate_lease(
    const GenerateSettings& gs, const net::Lease& lease, const env::QaItem& problem,
    const std::string& worker_id, const pulse::Int8State& first, const pulse::Int8State* second,
    int64_t switch_after, std::optional<uint64_t> label = std::nullopt) {
  ThreadPool pool(1);
  engine::ModelRunner model(worker::engine_weights_from_update(*gs.config, full_update(first)),
                            &pool);
  uint64_t version = label.value_or(first.version());
  std::map<int64_t, std::unique_ptr<worker::RolloutRecord>> live;
  std::vector<net::RolloutSubmission> out;
  episode::RunnerLimits limits;
  limits.slots = lease.samples;
  limits.capacity = gs.max_tokens;
  limits.max_tokens = gs.max_tokens;
  limits.sample_vocab = gs.sample_vocab;
  if (gs.eos >= 0) limits.stop_tokens = {gs.eos};
  limits.preallocate = false;
  episode::RunnerHooks hooks;
  hooks.on_token = [&](int64_t id, const engine::SampledToken& t) {
    std::vector<int32_t> ids;
    std::vector<float> lps;
    if (gs.topk > 0) episode::topk_row(t, gs.topk, ids, lps);
    live.at(id)->add_generated(t.token, t.logprob, version, ids, lps);
  };
  hooks.on_turn = [&](int64_t id, const env::Episode&, const env::Decision& d) {
    if (!d.done) live.at(id)->add_observation(d.appended);
  };
  hooks.on_end = [&](episode::FinishedEpisode&& f) {
    auto& rec = live.at(f.id);
    if (rec->tokens().size() > static_cast<size_t>(gs.max_tokens))
      rec->truncate(static_cast<size_t>(gs.max_tokens));
    rec->set_turns(f.episode->turns());
    out.push_back(rec->finish());
    live.erase(f.id);
  };
  episode::EpisodeRunner runner(model, *gs.codec, limits, hooks);
  const int64_t prompt = runner.add_prompt(lease.prompt_tokens);
  for (int32_t k = 0; k < lease.samples; ++k) {
    env::EpisodeConfig ec{lease.sampling.max_turns, lease.sampling.max_observation_tokens};
    auto ep = std::make_unique<env::Episode>(*gs.task, problem, *gs.codec, ec);
    episode::EpisodeSampling es;
    es.params.temperature = lease.sampling.temperature;
    es.params.top_p = lease.sampling.top_p;
    es.params.top_k = lease.sampling.top_k;
    es.seed = lease.seeds.at(static_cast<size_t>(k));
    es.draw = engine::DrawMode::kPositional;
    es.max_new_tokens = lease.sampling.max_new_tokens;
    es.params.top_logprobs = gs.topk;
    auto rec = std::make_unique<worker::RolloutRecord>(lease, worker_id, gs.topk);
    rec->set_replay_info(es.seed, kernels::target_name(kernels::active_target()), version);
    const int64_t id = runner.start(std::move(ep), prompt, es);
    live[id] = std::move(rec);
  }
  runner.drop_prompt(prompt);
  for (int64_t step = 0; runner.running() > 0; ++step) {
    if (step == switch_after && second) {
      worker::apply_update(model.host_weights(), full_update(*second));
      version = second->version();
    }
    runner.step();
  }
  return out;
}

}  // namespace stoa::verify::testing
