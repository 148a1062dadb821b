// The running digests a pipeline stage keeps per sequence for its commitment
// (core/stage_commitment.h), and the updates every party computes the same way: the stages, the
// head, and the replay that recomputes them on the whole model.
#pragma once
#include <cstdint>
#include <span>

#include "core/sha256.h"
#include "core/stage_commitment.h"
#include "engine/sampler.h"

namespace stoa::engine {

// One hidden row: the version as 8 little-endian bytes, then the row's f32 bytes (every target
// the engine runs on is little-endian).
void hash_row(Sha256& h, uint64_t version, std::span<const float> row);
// One draw: version (8 bytes), token (4), log-prob bits (4), the count of `top` (4), then each
// entry's token (4) and log-prob bits (4); little-endian.
void hash_draw(Sha256& h, uint64_t version, const SampledToken& token);

// What one stage keeps per sequence (a fork copies it).
struct SequenceDigests {
  Sha256 in;
  Sha256 out;
  int64_t rows = 0;
  int64_t draws = 0;

  // The commitment of stage `stage` whose span ends at `end_layer`, unsigned. The head's `in`
  // is zeros; the last stage's `out` is its draws'.
  StageCommitment commitment(int32_t stage, int64_t end_layer, bool head) const;
};

}  // namespace stoa::engine
