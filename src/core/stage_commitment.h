// What each stage of a pipeline commits to for one sequence (docs/design/pipeline.md, "Blame on
// the stage that lied"): a running SHA-256 of the hidden rows it received and of those it sent
// on — one row per token position, each prefixed by the weights version it was computed under
// (engine/stage_digests.h), so the digest does not depend on how passes cut the sequence — and,
// on the last stage, of the tokens it drew. At a rollout's end every stage signs its commitment
// with an Ed25519 key of its own (core/signing.h; its public key went to the hub with its asks
// for a place, and the hub hands the group's public keys to its head), so the head that submits
// the rollout cannot forge another stage's word, and checks every signature before it submits:
// a bad one in a submitted rollout is the head's doing.
//
// When such a rollout fails replay, the replay recomputes the same digests on the whole model
// (the rows at every stage boundary, the draws) and the first stage whose `out` differs is the
// one that lied: its input was true (the stage before it committed to the replay's rows, and
// the chain — each stage's `in` the `out` of the one before — is checked by the stages, by the
// head and at the hub's intake), its output was not. When every digest agrees, the stages
// computed what the weights give and the head submitted something else.
//
// Here, below the engine and the network, because the stages sign, the head checks, the hub
// verifies and the replay compares the same bytes.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/sha256.h"
#include "core/signing.h"

namespace stoa {

// One stage's signed word on one sequence.
struct StageCommitment {
  int32_t stage = 0;      // its index in the group (0: the head)
  int64_t end_layer = 0;  // its span's end: the boundary its `out` rows are taken at
  int64_t rows = 0;       // hidden rows it received (the head: rows it sent)
  int64_t draws = 0;      // tokens it drew (the last stage; 0 on the others)
  Digest in{};            // of the rows received (zeros on the head)
  Digest out{};           // of the rows sent on; on the last stage, of its draws
  Signature signature{};  // Ed25519, of the fields above and the group, by the stage's key

  bool operator==(const StageCommitment&) const = default;
};

// What a pipeline's rollout carries: its group (the hub's id; 0: no group, nothing committed) and
// the chain of its stages' commitments.
struct PipelineProof {
  uint64_t group_id = 0;
  std::vector<StageCommitment> chain;
};

// The bytes a commitment's signature covers: a fixed label, the group, and every other field.
std::vector<uint8_t> commitment_message(uint64_t group_id, const StageCommitment& c);
void sign_commitment(const SigningKey& key, uint64_t group_id, StageCommitment& c);
bool commitment_signed_by(const PublicKey& key, uint64_t group_id, const StageCommitment& c);

// The chain of a group's commitments, in stage order, as the head and the hub check it: one per
// stage from 0, boundaries ascending to `num_layers`, each stage's `in` the `out` of the one
// before, every stage on the same rows, only the last drawing. Empty when it holds; otherwise
// what is wrong, and the first stage it concerns in *stage.
std::string chain_fault(std::span<const StageCommitment> chain, int64_t num_layers, int* stage);

}  // namespace stoa
