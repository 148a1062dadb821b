// A pipeline's commitments (docs/design/pipeline.md, "Blame on the stage that lied"): at a
// rollout's end every stage signs what it received, sent on and drew; the chain holds, every
// signature verifies under its stage's public key only (and the head refuses one that does not),
// and the digests are those of the rows a single machine computes at the stage boundaries. A link
// that forges the rows between two stages is refused at the commit by the stage after it (the
// pipeline breaks); a stage with no key commits to nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/stage_commitment.h"
#include "engine/batch_decoder.h"
#include "engine/pipeline_backend.h"
#include "engine/pipeline_stage.h"
#include "engine/stage_digests.h"
#include "model/layer_span.h"
#include "pipeline_script.h"

namespace stoa::engine {
namespace {

using testing::LocalPipeline;
using testing::make_local_pipeline;
using testing::model_named;
using testing::random_tokens;

constexpr uint64_t kGroup = 77;

// One signing key per stage, made once.
const SigningKey& key_of(int stage) {
  static const std::vector<SigningKey> keys = [] {
    std::vector<SigningKey> k;
    for (int i = 0; i < 5; ++i) k.push_back(SigningKey::generate());
    return k;
  }();
  return keys.at(static_cast<size_t>(stage));
}

std::vector<PublicKey> public_keys(int64_t k) {
  std::vector<PublicKey> out;
  for (int s = 0; s < k; ++s) out.push_back(key_of(s).public_key());
  return out;
}

// A link between the head and stage 1 that adds 0.25 to one value of every pass it carries.
class ForgingLink final : public StageLink {
 public:
  explicit ForgingLink(std::unique_ptr<StageLink> inner) : inner_(std::move(inner)) {}
  uint64_t send(std::span<const uint8_t> frame) override {
    if (forge && stage_frame_kind(frame) == StageFrameKind::kPass) {
      StagePass p = decode_stage_pass(frame);
      if (!p.rows.empty()) p.rows[p.rows.size() / 2] += 0.25f;
      return inner_->send(encode_stage_pass(p));
    }
    return inner_->send(frame);
  }
  std::vector<uint8_t> await(uint64_t ticket) override { return inner_->await(ticket); }
  bool forge = false;

 private:
  std::unique_ptr<StageLink> inner_;
};

struct Keyed {
  LocalPipeline p;
  ForgingLink* link = nullptr;
};

// K stages, each given its key (stages are kept last first in LocalPipeline).
Keyed keyed_pipeline(const ModelWeights& w, int64_t k, bool keys = true) {
  Keyed out;
  out.p = make_local_pipeline(w, k, [&](std::unique_ptr<StageLink> next) {
    auto link = std::make_unique<ForgingLink>(std::move(next));
    out.link = link.get();
    return link;
  });
  if (keys) {
    for (size_t i = 0; i < out.p.stages.size(); ++i) {
      const int stage = static_cast<int>(k) - 1 - static_cast<int>(i);
      out.p.stages[i]->set_commit_key(kGroup, stage, key_of(stage));
    }
    out.p.head->set_commit_key(kGroup, key_of(0), public_keys(k));
  }
  return out;
}

struct Decoded {
  std::vector<SampledToken> draws;
  std::vector<int32_t> fed;  // the sequence's tokens (every row computed)
  PipelineProof proof;
};

// Two samples of one prompt decoded to their budgets; the proof of sample `which`.
Decoded decode_and_commit(EngineBackend& backend, int64_t vocab, size_t which = 1) {
  BatchDecoder dec(backend, 4, 64);
  GenerateOptions o;
  o.max_tokens = 5;
  o.seed = 9;
  o.sampling.temperature = 0.8;
  o.sampling.top_logprobs = 2;
  // As the worker starts a group's samples: a shared prompt, computed but its last token once,
  // and forks that each feed that token and draw their own.
  const int64_t prefix = dec.add_prefix(random_tokens(7, vocab, 3));
  std::vector<int64_t> slots;
  for (uint64_t i = 0; i < 2; ++i) {
    GenerateOptions sample = o;
    sample.seed += i;
    slots.push_back(dec.start_from_prefix(prefix, sample));
  }
  dec.drop_prefix(prefix);
  Decoded d;
  while (dec.active() > 0)
    for (const StepEvent& e : dec.step())
      if (e.slot == slots[which]) d.draws.push_back(e.sampled);
  d.fed = dec.sequence(slots[which]).tokens();
  d.proof = dec.pipeline_proof(slots[which]);
  for (int64_t s : slots) dec.discard(s);
  return d;
}

TEST(PipelineCommit, TheChainHoldsIsSignedAndHashesTheBoundaryRows) {
  for (const char* name : {"qwen3-6", "tiny-lfm2"}) {
    SCOPED_TRACE(name);
    const ModelWeights w = model_named(name);
    Keyed k = keyed_pipeline(w, 3);
    const Decoded d = decode_and_commit(*k.p.head, w.config.vocab_size);
    ASSERT_EQ(d.proof.group_id, kGroup);
    ASSERT_EQ(d.proof.chain.size(), 3u);
    int at = -1;
    EXPECT_EQ(chain_fault(d.proof.chain, w.config.num_layers, &at), "");
    for (int s = 0; s < 3; ++s) {
      const StageCommitment& c = d.proof.chain[static_cast<size_t>(s)];
      EXPECT_TRUE(commitment_signed_by(key_of(s).public_key(), kGroup, c));
      EXPECT_FALSE(commitment_signed_by(key_of(s + 1).public_key(), kGroup, c));
      EXPECT_FALSE(commitment_signed_by(key_of(s).public_key(), kGroup + 1, c));
    }
    // Rows: every token fed, the shared prompt's included (the fork carries its parent's).
    EXPECT_EQ(d.proof.chain[0].rows, static_cast<int64_t>(d.fed.size()));
    EXPECT_EQ(d.proof.chain[2].draws, static_cast<int64_t>(d.draws.size()));

    // The same digests from one machine's layers: each stage boundary's rows, in order.
    const std::vector<LayerSpan> spans = split_layers(w.config, 3);
    ThreadPool pool(2);
    std::vector<float> hidden;
    for (size_t s = 0; s < 2; ++s) {
      ModelRunner part(EngineWeights::from_model(w, WeightFormat::kInt8, spans[s]), &pool);
      Sequence seq = part.new_sequence(64);
      const SequenceInput in[] = {{&seq, d.fed, Logits::kNone}};
      (void)part.append_batch_stage(in, s == 0 ? nullptr : hidden.data());
      const std::span<const float> rows = part.pass_hidden();
      hidden.assign(rows.begin(), rows.end());
      Sha256 want;
      const size_t H = static_cast<size_t>(w.config.hidden_size);
      for (size_t r = 0; r < d.fed.size(); ++r)
        hash_row(want, 0, std::span<const float>(hidden).subspan(r * H, H));
      EXPECT_EQ(bytes_hex(d.proof.chain[s].out), bytes_hex(want.digest())) << "stage " << s;
    }
    Sha256 draws;
    for (const SampledToken& t : d.draws) hash_draw(draws, 0, t);
    EXPECT_EQ(bytes_hex(d.proof.chain[2].out), bytes_hex(draws.digest()));
    // A changed field no longer carries its stage's signature.
    StageCommitment forged = d.proof.chain[1];
    forged.out[0] ^= 1;
    EXPECT_FALSE(commitment_signed_by(key_of(1).public_key(), kGroup, forged));
  }
}

TEST(PipelineCommit, RowsForgedBetweenStagesAreRefusedAtTheCommit) {
  const ModelWeights w = model_named("qwen3-6");
  Keyed k = keyed_pipeline(w, 3);
  k.link->forge = true;
  try {
    (void)decode_and_commit(*k.p.head, w.config.vocab_size);
    FAIL() << "a chain over forged rows was committed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNetwork);
    EXPECT_NE(std::string(e.what()).find("other than the"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(k.p.head->broken());
}

TEST(PipelineCommit, WithoutKeysNothingIsCommittedAndAKeylessStageRefuses) {
  const ModelWeights w = model_named("qwen3-6");
  Keyed none = keyed_pipeline(w, 2, /*keys=*/false);
  const Decoded d = decode_and_commit(*none.p.head, w.config.vocab_size);
  EXPECT_EQ(d.proof.group_id, 0u);
  EXPECT_TRUE(d.proof.chain.empty());
  EXPECT_FALSE(none.p.head->broken());

  Keyed head_only = keyed_pipeline(w, 2, /*keys=*/false);
  head_only.p.head->set_commit_key(kGroup, key_of(0), public_keys(2));
  EXPECT_THROW((void)decode_and_commit(*head_only.p.head, w.config.vocab_size), Error);
  EXPECT_TRUE(head_only.p.head->broken());
}

TEST(PipelineCommit, AStageThatSignsWithAnotherKeyBreaksThePipelineBeforeAnythingIsSubmitted) {
  const ModelWeights w = model_named("qwen3-6");
  Keyed k = keyed_pipeline(w, 3);
  k.p.stages.back()->set_commit_key(kGroup, 1, key_of(4));  // stage 1 (stages are last first)
  try {
    (void)decode_and_commit(*k.p.head, w.config.vocab_size);
    FAIL() << "a chain with a bad signature was committed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stage 1 of the chain: its commitment is not signed"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(k.p.head->broken());
}

TEST(PipelineCommit, CommitFramesRoundTripAndRefuseTampering) {
  StageCommit c;
  c.seq = 12;
  StageCommitment a;
  a.stage = 0;
  a.end_layer = 3;
  a.rows = 40;
  a.in.fill(1);
  a.out.fill(2);
  a.signature.fill(3);
  StageCommitment b = a;
  b.stage = 1;
  b.end_layer = 6;
  b.draws = 9;
  c.chain = {a, b};
  std::vector<uint8_t> bytes = encode_stage_commit(c);
  const StageCommit back = decode_stage_commit(bytes);
  EXPECT_EQ(back.seq, 12u);
  EXPECT_EQ(back.chain, c.chain);
  bytes[20] ^= 1;
  EXPECT_THROW((void)decode_stage_commit(bytes), Error);  // the checksum
}

TEST(PipelineCommit, ChainFaultsNameTheStage) {
  std::vector<StageCommitment> chain(3);
  for (int s = 0; s < 3; ++s) {
    chain[static_cast<size_t>(s)].stage = s;
    chain[static_cast<size_t>(s)].end_layer = 2 * (s + 1);
    chain[static_cast<size_t>(s)].rows = 10;
    chain[static_cast<size_t>(s)].out.fill(static_cast<uint8_t>(s + 1));
    if (s > 0) chain[static_cast<size_t>(s)].in.fill(static_cast<uint8_t>(s));
  }
  int at = -1;
  EXPECT_EQ(chain_fault(chain, 6, &at), "");
  EXPECT_NE(chain_fault(chain, 8, &at), "");  // the last boundary is not the model's end
  EXPECT_EQ(at, 2);
  std::vector<StageCommitment> broken = chain;
  broken[2].in.fill(9);
  EXPECT_NE(chain_fault(broken, 6, &at), "");
  EXPECT_EQ(at, 2);
  broken = chain;
  broken[1].rows = 11;
  EXPECT_NE(chain_fault(broken, 6, &at), "");
  EXPECT_EQ(at, 1);
  broken = chain;
  broken[0].draws = 1;
  EXPECT_NE(chain_fault(broken, 6, &at), "");
  EXPECT_EQ(at, 0);
  EXPECT_NE(chain_fault(std::span(chain).first(1), 6, &at), "");
}

}  // namespace
}  // namespace stoa::engine
