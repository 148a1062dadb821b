// Exact replay of an untrusted rollout (docs/design/verification.md). The worker engine is int8,
// batch-invariant and deterministic, and the worker draws every token with the positional draw of
// a seed the hub chose (engine/sampler.h), so a rollout is a pure function of (prompt, seed,
// per-token weight versions, the task's observations). The validator recomputes it:
//
//  1. the tool turns: the transcript is walked turn by turn through a fresh env::Episode of the
//     hub's own task (its retriever), and every observation must equal what the task returns;
//  2. the model: the prompt but its last token is prefilled under `prompt_version`; then every run
//     of fed tokens that produced tokens under one version is prefilled under that version, over
//     the KV computed so far — the worker's in-flight weight switch, reproduced — and at every
//     generated position the sampling distribution is recomputed from the logits: the recorded
//     log-prob must equal it bit for bit, and the token must be the one the seed's draw picks.
//
// A verdict names the first differing position and what differed. Not thread-safe (one engine);
// the hub runs one per validation thread.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/hash.h"
#include "core/thread_pool.h"
#include "engine/backend.h"
#include "env/task.h"
#include "env/token_codec.h"
#include "gpu/engine_backend_choice.h"
#include "model/config.h"
#include "net/protocol.h"
#include "roles/verify/version_states.h"

namespace stoa::verify {

struct Verdict {
  bool pass = false;
  int64_t position = -1;   // the first differing token position (-1: none, or not positional)
  std::string what;        // "logprob", "token", "observation", ... (empty on a pass)
  std::string detail;      // human-readable
  double cpu_seconds = 0;  // this thread's CPU time for the replay
  int64_t replayed_tokens = 0;
  // A pipeline group's rollout that failed the model check: the stage that lied
  // (roles/verify/replay_blame.h). -1: not a pipeline rollout, or no blame computed (the hub
  // then holds the submitter to it).
  int blame_stage = -1;
};

// What the rollout was generated under: the hub's settings, identical for every lease.
struct ReplaySettings {
  net::SamplingParams sampling;
  int64_t sample_vocab = 0;          // ids the worker's sampler saw (0: the whole vocabulary)
  std::vector<int32_t> stop_tokens;  // unused by the replay itself; kept for the turn check
  int64_t capacity = 4096;           // the decode capacity (the hub's max_tokens)
  // What computes the replays (gpu/engine_backend_choice.h): the CPU engine by default; a GPU
  // computes the same bits (docs/design/vulkan-backend.md).
  gpu::BackendChoice backend = gpu::BackendChoice::kCpu;
};

class ReplayValidator {
 public:
  // Everything must outlive the validator. `threads` for the engine's pool (the hub's spare
  // cores).
  ReplayValidator(const ModelConfig& config, const env::Task& task, const env::TokenCodec& codec,
                  ReplaySettings settings, VersionStates& states, int threads = 1,
                  size_t keep_versions = 3);
  ~ReplayValidator();

  // Replays `rollout` (already through the hub's structural intake checks) for `problem`, whose
  // prompt is the first `prompt_length` tokens. Never throws for a bad rollout: a replay that
  // cannot run is a failing verdict: what = "unreplayable" (hub::kUnreplayableVerdict) for a
  // version whose blobs are gone, "replay_refused" for anything else it refuses.
  Verdict check(const net::RolloutSubmission& rollout, const env::QaItem& problem,
                size_t prompt_length);

 private:
  Verdict check_observations(const net::RolloutSubmission& r, const env::QaItem& problem,
                             size_t prompt_length) const;
  Verdict check_model(const net::RolloutSubmission& r, size_t prompt_length);
  // Sets v.blame_stage for a pipeline rollout whose model check failed, and says why in detail.
  void blame(const net::RolloutSubmission& r, size_t prompt_length, Verdict& v);
  // The engine holding `version`'s weights (built once per version, the last few kept: a
  // rollout's tokens span at most the staleness window, and the sequences move between them).
  engine::EngineBackend& runner_for(uint64_t version);
  // A sequence holding the prompt but its last token computed under `version` (a group's G
  // rollouts share the prompt: it is computed once and forked, as the worker does), with room
  // for at least `capacity` tokens.
  std::unique_ptr<engine::SequenceState> prompt_state(std::span<const int32_t> prompt_but_last,
                                                      uint64_t version, int64_t capacity);

  const ModelConfig& config_;
  const env::Task& task_;
  const env::TokenCodec& codec_;
  ReplaySettings settings_;
  VersionStates& states_;
  std::unique_ptr<ThreadPool> pool_;
  size_t keep_versions_;
  std::map<uint64_t, std::unique_ptr<engine::EngineBackend>> runners_;  // by version
  struct CachedPrompt {
    uint64_t version = 0;
    std::vector<int32_t> tokens;
    std::unique_ptr<engine::SequenceState> seq;
  };
  std::vector<CachedPrompt> prompts_;  // most recent last
};

// The CPU time of the calling thread, in seconds.
double thread_cpu_seconds();

}  // namespace stoa::verify
