// Blame in the replay of a pipeline group's rollout (docs/design/pipeline.md, "Blame on the stage
// that lied"; core/stage_commitment.h). The head submits the rollout, so a failing replay alone
// says only that some member of the group lied. Every stage committed to digests of the rows it
// sent on (the last: of its draws); the replay recomputes them on the whole model — the rows at
// each stage boundary, read between layers (engine::LayerObserver), and every draw as an honest
// last stage makes it — and the first stage whose commitment differs is the one that lied. When
// every commitment agrees, the stages computed what the weights give and the head submitted
// something else.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "core/stage_commitment.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "net/protocol.h"

namespace stoa::verify {

// Which version computed each position of a rollout, as the replay feeds it: the prompt but its
// last token under the prompt's version, then every fed token under the version of the pass that
// fed it (the one that drew the next generated token: the worker's in-flight weight switch).
struct ReplayPositions {
  size_t prompt_length = 0;
  size_t first_gen = 0;  // the first generated position
  size_t last_gen = 0;   // the last one: tokens [0, last_gen) are fed
  uint64_t prompt_version = 0;
  std::vector<uint64_t> fed_version;  // per token; meaningful below last_gen

  // The version position j's rows were computed under (j < last_gen).
  uint64_t row_version(size_t j) const {
    return j + 1 < prompt_length ? prompt_version : fed_version[j];
  }
};
// Nullopt when there is nothing to replay (an empty prompt, no generated token).
std::optional<ReplayPositions> replay_positions(const net::RolloutSubmission& r,
                                                size_t prompt_length);

// The CPU engine holding `version`'s weights: the blame pass watches its layers, which only the
// CPU engine offers. The reference is used for one pass at a time.
using CpuRunnerFor = std::function<engine::ModelRunner&(uint64_t version)>;

// How the rollout's tokens were drawn: the hub's sampling settings with top_logprobs = the
// lease's top-K (what the worker asks its last stage for), and the ids the sampler sees.
struct BlameSampling {
  engine::SamplingParams params;
  int64_t sample_vocab = 0;  // 0: the whole vocabulary
};

// The digests an honest group would have committed to, recomputed on the whole model.
struct ReplayedDigests {
  int64_t rows = 0;              // positions fed (last_gen)
  int64_t draws = 0;             // positions drawn (the generated ones)
  std::vector<Digest> boundary;  // per boundary asked for: the rows there (a stage's `out`)
  Digest draws_out{};            // the draws (the last stage's `out`)
};

// Replays `r` from scratch (a fresh sequence, no cached prompt) on the runners of `runner_for`,
// hashing every fed position's rows at each layer count of `end_layers` (ascending, each in
// [1, num_layers)) and every generated position's draw. `r` must carry a seed.
ReplayedDigests replay_stage_digests(const net::RolloutSubmission& r, const ReplayPositions& at,
                                     std::span<const int64_t> end_layers,
                                     const BlameSampling& sampling, const CpuRunnerFor& runner_for);

struct Blame {
  int stage = -1;      // the stage that lied (-1: not a pipeline rollout, or none computed)
  std::string reason;  // why, in words
};

// The stage of `r`'s group (r.stage_commitments, the head's first) that lied, for a rollout whose
// model replay failed: the head for a broken chain or counts other than the replay's, else the
// first stage whose `out` differs from the replay's, else the head. -1 for a rollout without
// commitments or one the replay cannot walk (no seed, nothing generated).
Blame blame_stage(const net::RolloutSubmission& r, size_t prompt_length, int64_t num_layers,
                  const BlameSampling& sampling, const CpuRunnerFor& runner_for);

}  // namespace stoa::verify
