#include "roles/verify/replay_validator.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "env/episode.h"
#include "roles/episode/pulse_weights.h"
#include "roles/episode/topk_row.h"
#include "roles/hub/verification/rollout_audit.h"
#include "roles/verify/replay_blame.h"

namespace stoa::verify {
namespace {

// Every digit a float needs to round-trip: a log-prob forged by one ulp must not print as the
// value it was compared against.
std::string exact(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

Verdict fail(int64_t position, std::string what, std::string detail) {
  Verdict v;
  v.position = position;
  v.what = std::move(what);
  v.detail = std::move(detail);
  return v;
}

// The top-K row the worker submitted with `token`: the sampler's `top` (the K most likely entries
// of the sampling distribution, by log-prob then id: engine::Sampler::sample) through the worker's
// own row rule (episode::topk_row).
void expected_topk_row(std::vector<engine::TokenLogprob> dist, int32_t token, float logprob,
                       size_t k, std::vector<int32_t>& ids, std::vector<float>& lps) {
  engine::SampledToken t;
  t.token = token;
  t.logprob = logprob;
  const size_t top = std::min(dist.size(), k);
  std::partial_sort(dist.begin(), dist.begin() + static_cast<std::ptrdiff_t>(top), dist.end(),
                    [](const engine::TokenLogprob& a, const engine::TokenLogprob& b) {
                      return a.logprob != b.logprob ? a.logprob > b.logprob : a.token < b.token;
                    });
  t.top.assign(dist.begin(), dist.begin() + static_cast<std::ptrdiff_t>(top));
  ids.clear();
  lps.clear();
  episode::topk_row(t, static_cast<int32_t>(k), ids, lps);
}

// The first index where a and b differ (min size when one is a prefix of the other).
size_t first_difference(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

ReplayValidator::ReplayValidator(const ModelConfig& config, const env::Task& task,
                                 const env::TokenCodec& codec, ReplaySettings settings,
                                 VersionStates& states, int threads, size_t keep_versions)
    : config_(config),
      task_(task),
      codec_(codec),
      settings_(std::move(settings)),
      states_(states),
      pool_(std::make_unique<ThreadPool>(std::max(1, threads))),
      keep_versions_(std::max<size_t>(1, keep_versions)) {}

ReplayValidator::~ReplayValidator() = default;

Verdict ReplayValidator::check(const net::RolloutSubmission& rollout, const env::QaItem& problem,
                               size_t prompt_length) {
  const double t0 = thread_cpu_seconds();
  Verdict v;
  try {
    v = check_observations(rollout, problem, prompt_length);
    if (v.what.empty()) v = check_model(rollout, prompt_length);
    if (v.what == "logprob" || v.what == "token" || v.what == "topk")
      blame(rollout, prompt_length, v);
  } catch (const env::EnvironmentError& e) {
    v = fail(-1, hub::kEnvironmentVerdict, e.what());  // the task's failure, not the worker's
  } catch (const Error& e) {
    // kNotFound: a version's weights no route reaches any more (pruned: the hub's own limit,
    // hub::kUnreplayableVerdict); anything else the replay refuses is the rollout's.
    v = fail(-1, e.kind() == ErrorKind::kNotFound ? hub::kUnreplayableVerdict : "replay_refused",
             e.what());
  }
  v.pass = v.what.empty();
  v.cpu_seconds = thread_cpu_seconds() - t0;
  return v;
}

// The turns: every turn must end where the worker's runner ends one, and every observation must
// be the hub's task's own.
Verdict ReplayValidator::check_observations(const net::RolloutSubmission& r,
                                            const env::QaItem& problem,
                                            size_t prompt_length) const {
  const net::SamplingParams& s = settings_.sampling;
  env::Episode ep(task_, problem, codec_, {s.max_turns, s.max_observation_tokens});
  const std::span<const int32_t> tokens(r.tokens);
  const size_t n = tokens.size();
  if (ep.tokens().size() != prompt_length || n < prompt_length ||
      first_difference(ep.tokens(), tokens.first(prompt_length)) != prompt_length)
    return fail(0, "prompt", "the transcript does not start with the task's prompt");
  size_t t = prompt_length;
  while (t < n) {
    if (ep.done())
      return fail(static_cast<int64_t>(t), "after_end", "tokens after the episode ended");
    if (!r.mask[t])
      return fail(static_cast<int64_t>(t), "observation",
                  "an observation where the model's turn should start");
    const size_t a = t;
    while (t < n && r.mask[t]) ++t;
    const std::span<const int32_t> turn = tokens.subspan(a, t - a);
    // The runner ends a turn at the first stop token or stop string, or at its budget.
    const int64_t budget =
        std::min<int64_t>(s.max_new_tokens, settings_.capacity - static_cast<int64_t>(a));
    for (size_t k = 1; k <= turn.size() && t < n; ++k) {
      const bool stop = std::find(settings_.stop_tokens.begin(), settings_.stop_tokens.end(),
                                  turn[k - 1]) != settings_.stop_tokens.end() ||
                        ep.stop_position(codec_.decode(turn.first(k))) != std::string::npos;
      if (stop && k < turn.size())
        return fail(static_cast<int64_t>(a + k), "turn_end", "the turn goes on after its stop");
      if (k == turn.size() && !stop && static_cast<int64_t>(k) < budget)
        return fail(static_cast<int64_t>(a + k), "turn_end",
                    "an observation after a turn that did not stop");
    }
    const env::Decision d = ep.step(turn);
    const size_t b = t;
    while (t < n && !r.mask[t]) ++t;
    const std::span<const int32_t> obs = tokens.subspan(b, t - b);
    // A transcript cut by its budget may end inside an observation: a prefix is all it holds.
    const bool cut = t == n;
    const size_t same = first_difference(obs, d.appended);
    if (same < obs.size() || (!cut && obs.size() != d.appended.size()))
      return fail(static_cast<int64_t>(b + same), "observation",
                  cat("the observation differs from the task's (", obs.size(), " tokens, the task ",
                      d.appended.size(), ")"));
  }
  return {};
}

engine::EngineBackend& ReplayValidator::runner_for(uint64_t version) {
  if (auto it = runners_.find(version); it != runners_.end()) return *it->second;
  const pulse::Int8State& state = states_.at(version);
  // The worker's own path from PULSE state to engine weights (roles/episode/pulse_weights.h).
  std::unique_ptr<engine::EngineBackend> runner =
      gpu::make_engine_backend(
          settings_.backend,
          std::make_unique<engine::EngineWeights>(episode::engine_weights_from_state(
              config_, {state.tensors().begin(), state.tensors().end()})),
          pool_.get())
          .backend;
  while (runners_.size() >= keep_versions_) runners_.erase(runners_.begin());  // the oldest
  return *runners_.emplace(version, std::move(runner)).first->second;
}

std::unique_ptr<engine::SequenceState> ReplayValidator::prompt_state(
    std::span<const int32_t> prompt_but_last, uint64_t version, int64_t capacity) {
  constexpr size_t kKeep = 4;
  for (const CachedPrompt& c : prompts_) {
    if (c.version == version && c.seq->capacity() >= capacity &&
        std::equal(c.tokens.begin(), c.tokens.end(), prompt_but_last.begin(),
                   prompt_but_last.end()))
      return c.seq->fork_state();
  }
  engine::EngineBackend& runner = runner_for(version);
  std::unique_ptr<engine::SequenceState> seq = runner.new_state(capacity);
  if (!prompt_but_last.empty()) {
    const engine::BackendInput prefill[] = {{seq.get(), prompt_but_last, engine::Logits::kNone}};
    runner.forward(prefill);
  }
  if (prompts_.size() >= kKeep) prompts_.erase(prompts_.begin());
  prompts_.push_back(
      CachedPrompt{version, std::vector<int32_t>(prompt_but_last.begin(), prompt_but_last.end()),
                   seq->fork_state()});
  return seq;
}

void ReplayValidator::blame(const net::RolloutSubmission& r, size_t prompt_length, Verdict& v) {
  if (r.stage_commitments.empty()) return;
  BlameSampling sampling;
  sampling.params.temperature = settings_.sampling.temperature;
  sampling.params.top_p = settings_.sampling.top_p;
  sampling.params.top_k = settings_.sampling.top_k;
  // The worker asks its sampler (a pipeline's last stage) for the lease's top-K.
  sampling.params.top_logprobs = std::max<int64_t>(0, r.topk);
  sampling.sample_vocab = settings_.sample_vocab;
  // The blame pass reads the rows between layers, which only the CPU engine shows: with another
  // backend it runs on CPU engines of its own, built from the same states (the same bits) and
  // dropped after it (a failing pipeline rollout is rare; their memory is not kept for it).
  std::map<uint64_t, std::unique_ptr<engine::ModelRunner>> own;
  const CpuRunnerFor cpu_runner_for = [&](uint64_t version) -> engine::ModelRunner& {
    if (settings_.backend == gpu::BackendChoice::kCpu)
      if (auto* cpu = dynamic_cast<engine::ModelRunner*>(&runner_for(version))) return *cpu;
    if (auto it = runners_.find(version); it != runners_.end())
      if (auto* cpu = dynamic_cast<engine::ModelRunner*>(it->second.get())) return *cpu;
    if (auto it = own.find(version); it != own.end()) return *it->second;
    const pulse::Int8State& state = states_.at(version);
    auto runner = std::make_unique<engine::ModelRunner>(
        std::make_unique<engine::EngineWeights>(episode::engine_weights_from_state(
            config_, {state.tensors().begin(), state.tensors().end()})),
        pool_.get());
    return *own.emplace(version, std::move(runner)).first->second;
  };
  try {
    const Blame b = blame_stage(r, prompt_length, config_.num_layers, sampling, cpu_runner_for);
    v.blame_stage = b.stage;
    if (b.stage >= 0) v.detail += cat("; blame: ", b.reason);
  } catch (const Error& e) {
    // Weights gone since the model check (pruned), or a pass refused: the verdict stands and the
    // hub holds the submitter to it, as for a rollout of one machine.
    v.detail += cat("; no blame: ", e.what());
  }
}

Verdict ReplayValidator::check_model(const net::RolloutSubmission& r, size_t prompt_length) {
  const size_t n = r.tokens.size();
  if (!r.seed) return fail(-1, "no_seed", "the rollout records no sampling seed");
  const std::optional<ReplayPositions> at = replay_positions(r, prompt_length);
  if (!at) return fail(-1, "structure", "nothing to replay");
  const size_t last_gen = at->last_gen;
  const std::vector<uint64_t>& fed_version = at->fed_version;
  const uint64_t prompt_version = at->prompt_version;
  engine::SamplingParams params;
  params.temperature = settings_.sampling.temperature;
  params.top_p = settings_.sampling.top_p;
  params.top_k = settings_.sampling.top_k;
  const int64_t V = config_.vocab_size;
  const int64_t sv = settings_.sample_vocab > 0 ? std::min(V, settings_.sample_vocab) : V;

  const std::span<const int32_t> tokens(r.tokens);
  std::unique_ptr<engine::SequenceState> seq =
      prompt_state(tokens.first(prompt_length - 1), prompt_version,
                   std::max<int64_t>(settings_.capacity, static_cast<int64_t>(n) + 1));
  Verdict out;
  std::vector<int32_t> topk_ids;
  std::vector<float> topk_lps;
  size_t j = prompt_length - 1;
  while (j < last_gen) {
    const uint64_t v = fed_version[j];
    size_t e = j;
    while (e < last_gen && fed_version[e] == v) ++e;
    engine::EngineBackend& runner = runner_for(v);
    // Logits only where the next token was generated: a fed observation (whose next token is the
    // observation's own) needs none, which spares the LM head for every observation token.
    // Appending in pieces computes the same bits (the engine is prefill/decode invariant).
    for (size_t a = j; a < e;) {
      const bool generated_next = r.mask[a + 1] != 0;
      size_t b = a;
      while (b < e && (r.mask[b + 1] != 0) == generated_next) ++b;
      const std::span<const int32_t> piece = tokens.subspan(a, b - a);
      if (!generated_next) {
        const engine::BackendInput fed[] = {{seq.get(), piece, engine::Logits::kNone}};
        runner.forward(fed);
        a = b;
        continue;
      }
      const engine::BackendInput scored[] = {{seq.get(), piece, engine::Logits::kAll}};
      // Valid until the next pass: every row is read before it.
      const std::span<const float> logits = runner.forward(scored).rows(0);
      for (size_t row = 0; row < b - a; ++row) {
        const size_t p = a + row + 1;
        ++out.replayed_tokens;
        const std::span<const float> z =
            logits.subspan(row * static_cast<size_t>(V), static_cast<size_t>(sv));
        const std::vector<engine::TokenLogprob> dist = engine::sampling_distribution(z, params);
        const int32_t token = r.tokens[p];
        auto it = std::find_if(dist.begin(), dist.end(),
                               [&](const engine::TokenLogprob& x) { return x.token == token; });
        if (it == dist.end())
          return fail(static_cast<int64_t>(p), "token",
                      cat("token ", token, " is outside the sampling support (version ", v, ")"));
        const float recorded = r.logprobs[p];
        if (std::memcmp(&recorded, &it->logprob, sizeof(float)) != 0)
          return fail(static_cast<int64_t>(p), "logprob",
                      cat("recorded ", exact(recorded), ", replayed ", exact(it->logprob),
                          " (version ", v, ")"));
        const engine::TokenLogprob& drawn =
            dist[engine::pick_index(dist, engine::positional_uniform(*r.seed, p))];
        if (drawn.token != token)
          return fail(
              static_cast<int64_t>(p), "token",
              cat("token ", token, ", the seed's draw picks ", drawn.token, " (version ", v, ")"));
        if (r.topk > 0) {
          // The top-K rows feed the trainer too: every id and every log-prob bit must match.
          const size_t k = static_cast<size_t>(r.topk);
          expected_topk_row(dist, token, it->logprob, k, topk_ids, topk_lps);
          for (size_t i = 0; i < k; ++i) {
            const int32_t id = r.topk_ids[p * k + i];
            const float lp = r.topk_logprobs[p * k + i];
            if (id != topk_ids[i] || std::memcmp(&lp, &topk_lps[i], sizeof(float)) != 0)
              return fail(static_cast<int64_t>(p), "topk",
                          cat("top-K entry ", i, ": recorded token ", id, " at ", exact(lp),
                              ", replayed token ", topk_ids[i], " at ", exact(topk_lps[i]),
                              " (version ", v, ")"));
          }
        }
      }
      a = b;
    }
    j = e;
  }
  return out;
}

}  // namespace stoa::verify
