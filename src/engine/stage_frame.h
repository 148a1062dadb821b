// What the stages of a pipeline say to each other, as bytes (docs/design/pipeline.md, "Stage
// frames"). The stage that embeds (the head, where the rollouts are driven) sends each pass's
// hidden states down the chain; every stage runs its layers and forwards its own; the last
// stage, which holds the output head, draws the tokens with the head's uniforms and answers
// with them — a few bytes a token back instead of a vocabulary of logits.
//
// A frame: magic "STG1", one kind byte, the body, and the xxh3-128 low word of everything
// before it. Decoding never reads past the frame, never allocates more than the frame's own
// size implies, and names the field that is wrong (kBadFormat). A checksum catches a torn or
// corrupt link, not a lying stage: a stage that forges hidden states is caught by replay
// verification, since the tokens it makes are not the ones the weights give.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/stage_commitment.h"
#include "engine/backend.h"
#include "engine/sampler.h"

namespace stoa::engine {

enum class StageFrameKind : uint8_t {
  kOpen = 1,     // a new sequence: seq, capacity
  kFork = 2,     // seq becomes a copy of source
  kClose = 3,    // seq is dropped
  kReserve = 4,  // seq's cache is reserved for its whole capacity (SequenceState::preallocate)
  kPass = 5,     // a pass's inputs and hidden states
  kSampled = 6,  // the last stage's answer to a pass: the drawn tokens
  kDone = 7,     // the answer to a control frame
  kError = 8,    // a stage could not do what it was asked: the message says which and why
  // Down: compute with the weights of this version from now on (a safe point: no pass in
  // flight). Up, the last stage's answer: the version the stages hold — above the one asked
  // when a stage's weights are already past it (an anchor), so the head catches up.
  kWeights = 9,
  // A rollout's end (docs/design/pipeline.md, "Blame on the stage that lied"): each stage checks
  // that the last commitment's `out` is what it received, adds its own, signed, and passes it
  // on; the last stage answers with the whole chain, the same kind.
  kCommit = 10,
};
const char* stage_frame_kind_name(StageFrameKind kind);

struct StageControl {
  StageFrameKind kind = StageFrameKind::kOpen;  // kOpen, kFork, kClose or kReserve
  uint64_t seq = 0;
  uint64_t source = 0;   // kFork
  int64_t capacity = 0;  // kOpen
};

// One input of a pass: a sequence, the position its tokens start at (its length before the
// pass: a stage whose copy has another length is out of step and refuses), and its tokens.
struct StagePassInput {
  uint64_t seq = 0;
  int64_t position = 0;
  Logits logits = Logits::kLast;
  std::vector<int32_t> tokens;
};

struct StagePass {
  uint64_t pass = 0;  // the head's pass counter, echoed in the answer
  std::vector<StagePassInput> inputs;
  std::vector<SampleRequest> requests;  // what the last stage draws
  int64_t hidden = 0;                   // the row width of `rows`
  std::vector<float> rows;              // [total tokens, hidden], inputs back to back
};

struct StageCommit {
  uint64_t seq = 0;
  std::vector<StageCommitment> chain;  // stage 0's first
};

struct StageSampled {
  uint64_t pass = 0;
  std::vector<SampledToken> tokens;  // one per request, in order
};

std::vector<uint8_t> encode_stage_control(const StageControl& control);
std::vector<uint8_t> encode_stage_pass(const StagePass& pass);
std::vector<uint8_t> encode_stage_sampled(const StageSampled& sampled);
std::vector<uint8_t> encode_stage_done();
std::vector<uint8_t> encode_stage_error(const std::string& message);
std::vector<uint8_t> encode_stage_weights(uint64_t version);
std::vector<uint8_t> encode_stage_commit(const StageCommit& commit);

// The kind of a whole, intact frame (magic and checksum checked); kBadFormat otherwise.
StageFrameKind stage_frame_kind(std::span<const uint8_t> frame);
StageControl decode_stage_control(std::span<const uint8_t> frame);
StagePass decode_stage_pass(std::span<const uint8_t> frame);
StageSampled decode_stage_sampled(std::span<const uint8_t> frame);
std::string decode_stage_error(std::span<const uint8_t> frame);
uint64_t decode_stage_weights(std::span<const uint8_t> frame);
StageCommit decode_stage_commit(std::span<const uint8_t> frame);

// The bytes of a pass frame carrying `tokens` tokens in `inputs` inputs with `requests` draws
// at row width `hidden` (what a link carries per step: docs/design/pipeline.md).
int64_t stage_pass_bytes(int64_t tokens, int64_t inputs, int64_t requests, int64_t hidden);

}  // namespace stoa::engine
