#include "engine/pipeline_backend.h"

#include "core/error.h"
#include "core/log.h"

namespace stoa::engine {

// A sequence of the pipeline: the head's own copy (its layers' caches, the tokens) and its id
// on the stages after it, which drop their copies when this one goes.
class PipelineSequence final : public SequenceState {
 public:
  PipelineSequence(const PipelineBackend& owner, uint64_t id, Sequence head)
      : owner_(owner), id_(id), head_(std::move(head)) {}
  ~PipelineSequence() override {
    if (owner_.broken()) return;  // the stages are being rebuilt: nothing to tell them
    try {
      (void)owner_.control({StageFrameKind::kClose, id_, 0, 0});
    } catch (const Error& e) {
      log_warn("pipeline", "dropping sequence ", id_, " on the stages failed: ", e.what());
    }
  }
  PipelineSequence(const PipelineSequence&) = delete;
  PipelineSequence& operator=(const PipelineSequence&) = delete;

  int64_t length() const override { return head_.length(); }
  int64_t capacity() const override { return head_.capacity(); }
  const std::vector<int32_t>& tokens() const override { return head_.tokens(); }
  void preallocate() override {
    (void)owner_.control({StageFrameKind::kReserve, id_, 0, 0});
    head_.preallocate();
  }
  std::unique_ptr<SequenceState> fork_state() const override {
    const uint64_t id = owner_.control({StageFrameKind::kFork, 0, id_, 0});
    auto fork = std::make_unique<PipelineSequence>(owner_, id, head_.fork());
    fork->digests_ = digests_;  // the parent's rows are the fork's
    return fork;
  }
  PipelineProof pipeline_proof() override { return owner_.commit(*this); }

  uint64_t id() const { return id_; }
  Sequence& head() { return head_; }
  SequenceDigests& digests() { return digests_; }
  const SequenceDigests& digests() const { return digests_; }
  const PipelineBackend* owner() const { return &owner_; }

 private:
  const PipelineBackend& owner_;
  uint64_t id_;
  Sequence head_;
  SequenceDigests digests_;  // the rows the head sent, the draws it asked for
};

PipelineBackend::PipelineBackend(std::unique_ptr<EngineWeights> head,
                                 std::unique_ptr<StageLink> next, ThreadPool* pool)
    : runner_(std::move(head), pool), next_(std::move(next)) {
  const LayerSpan span = runner_.weights().span();
  STOA_CHECK(span.embeds() && !span.heads(config()) && next_ != nullptr,
             ErrorKind::kInvalidArgument, "a pipeline's head holds the first layers and not the",
             " output head, and links to the next stage; this one holds ",
             span_string(config(), span));
}

PipelineBackend::~PipelineBackend() = default;

bool PipelineBackend::broken() const {
  std::lock_guard<std::mutex> lock(broken_mu_);
  return !broken_.empty();
}

void PipelineBackend::check_usable() const {
  std::lock_guard<std::mutex> lock(broken_mu_);
  STOA_CHECK(broken_.empty(), ErrorKind::kNetwork, "the pipeline is broken: ", broken_);
}

void PipelineBackend::break_with(const std::string& reason) const {
  {
    std::lock_guard<std::mutex> lock(broken_mu_);
    if (broken_.empty()) broken_ = reason;
  }
  fail(ErrorKind::kNetwork, "pipeline: ", reason);
}

uint64_t PipelineBackend::send_locked(std::span<const uint8_t> frame) const {
  check_usable();
  try {
    bytes_sent_ += static_cast<int64_t>(frame.size());
    return next_->send(frame);
  } catch (const Error& e) {
    break_with(e.what());
  }
}

std::vector<uint8_t> PipelineBackend::await_answer(uint64_t ticket) const {
  std::vector<uint8_t> answer;
  try {
    answer = next_->await(ticket);
    bytes_received_ += static_cast<int64_t>(answer.size());
    if (stage_frame_kind(answer) == StageFrameKind::kError) break_with(decode_stage_error(answer));
  } catch (const Error& e) {
    break_with(e.what());
  }
  return answer;
}

uint64_t PipelineBackend::control(StageControl c) const {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (c.seq == 0) c.seq = next_id_++;
    ticket = send_locked(encode_stage_control(c));
  }
  const std::vector<uint8_t> answer = await_answer(ticket);
  if (stage_frame_kind(answer) != StageFrameKind::kDone)
    break_with(cat("a stage answered a ", stage_frame_kind_name(c.kind), " frame with ",
                   stage_frame_kind_name(stage_frame_kind(answer))));
  return c.seq;
}

uint64_t PipelineBackend::use_weights(uint64_t version) {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = send_locked(encode_stage_weights(version));
  }
  const std::vector<uint8_t> answer = await_answer(ticket);
  if (stage_frame_kind(answer) != StageFrameKind::kWeights)
    break_with(cat("a stage answered a weights frame with ",
                   stage_frame_kind_name(stage_frame_kind(answer))));
  const uint64_t held = decode_stage_weights(answer);
  stages_version_ = held;
  return held;
}

void PipelineBackend::set_commit_key(uint64_t group_id, const SigningKey& key,
                                     std::vector<PublicKey> stage_keys) {
  std::lock_guard<std::mutex> lock(mu_);
  group_id_ = group_id;
  commit_key_ = key;
  stage_keys_ = std::move(stage_keys);
}

PipelineProof PipelineBackend::commit(const PipelineSequence& seq) const {
  PipelineProof proof;
  StageCommit c;
  c.seq = seq.id();
  uint64_t ticket = 0;
  std::vector<PublicKey> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!commit_key_) return proof;  // a group formed by hand: nothing to commit to
    keys = stage_keys_;
    proof.group_id = group_id_;
    StageCommitment own = seq.digests().commitment(0, runner_.weights().span().last, true);
    own.draws = 0;  // the head draws nothing: its count is what it asked the last stage for
    sign_commitment(*commit_key_, group_id_, own);
    c.chain.push_back(own);
    ticket = send_locked(encode_stage_commit(c));
  }
  const std::vector<uint8_t> answer = await_answer(ticket);
  StageCommit got;
  try {
    got = decode_stage_commit(answer);
  } catch (const Error& e) {
    break_with(cat("a stage answered a commit frame with ",
                   stage_frame_kind_name(stage_frame_kind(answer)), ": ", e.what()));
  }
  int at = 0;
  std::string fault = chain_fault(got.chain, config().num_layers, &at);
  if (fault.empty() && (got.seq != c.seq || got.chain.front() != c.chain.front()))
    fault = cat("the chain of sequence ", c.seq, " came back with another head commitment");
  if (fault.empty() && got.chain.back().draws != seq.digests().draws) {
    at = static_cast<int>(got.chain.size()) - 1;
    fault = cat("the last stage counts ", got.chain.back().draws, " draws, the head asked for ",
                seq.digests().draws);
  }
  if (fault.empty() && got.chain.size() != keys.size())
    fault = cat(got.chain.size(), " commitments for a group of ", keys.size(), " stages");
  for (size_t s = 1; fault.empty() && s < got.chain.size(); ++s) {
    if (commitment_signed_by(keys[s], proof.group_id, got.chain[s])) continue;
    at = static_cast<int>(s);
    fault = "its commitment is not signed with its key";
  }
  // A chain that does not hold or a signature that does not verify is a lying (or torn) stage:
  // nothing is submitted, the pipeline breaks naming it — so a bad chain in a submitted rollout
  // is the head's own doing.
  if (!fault.empty()) break_with(cat("stage ", at, " of the chain: ", fault));
  proof.chain = std::move(got.chain);
  return proof;
}

void PipelineBackend::reconnect(std::unique_ptr<StageLink> next) {
  STOA_CHECK(next != nullptr, ErrorKind::kInvalidArgument, "a pipeline needs a next stage");
  std::lock_guard<std::mutex> lock(mu_);
  next_ = std::move(next);  // the old link goes: its stages end the old session
  std::lock_guard<std::mutex> broken_lock(broken_mu_);
  broken_.clear();
}

std::unique_ptr<SequenceState> PipelineBackend::new_state(int64_t capacity) const {
  Sequence head = runner_.new_sequence(capacity);  // checks the capacity before the stages see it
  const uint64_t id = control({StageFrameKind::kOpen, 0, 0, capacity});
  return std::make_unique<PipelineSequence>(*this, id, std::move(head));
}

PassLogits PipelineBackend::forward(std::span<const BackendInput> /*inputs*/) {
  fail(ErrorKind::kUnsupported,
       "a pipeline's logits stay on its last stage: it is driven through forward_sampled");
}

std::vector<SampledToken> PipelineBackend::forward_sampled(
    std::span<const BackendInput> inputs, std::span<const SampleRequest> requests) {
  check_sample_requests(inputs, requests);
  std::unique_lock<std::mutex> lock(mu_);
  StagePass pass;
  pass.pass = ++passes_;
  pass.hidden = config().hidden_size;
  pass.requests.assign(requests.begin(), requests.end());
  head_inputs_.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto* seq = dynamic_cast<PipelineSequence*>(inputs[i].seq);
    STOA_CHECK(seq != nullptr && seq->owner() == this, ErrorKind::kInvalidArgument, "batch input ",
               i, ": the sequence belongs to another engine backend");
    head_inputs_.push_back({&seq->head(), inputs[i].tokens, inputs[i].logits});
    pass.inputs.push_back({seq->id(),
                           seq->length(),
                           inputs[i].logits,
                           {inputs[i].tokens.begin(), inputs[i].tokens.end()}});
  }
  // The head's pass validates the inputs before any sequence changes; past it, a failure
  // breaks the pipeline (the stages are out of step with the head).
  (void)runner_.append_batch_stage(head_inputs_, nullptr);
  const std::span<const float> hidden = runner_.pass_hidden();
  pass.rows.assign(hidden.begin(), hidden.end());
  {
    const uint64_t version = stages_version_;
    const size_t H = static_cast<size_t>(pass.hidden);
    size_t row = 0;
    for (const BackendInput& in : inputs) {
      SequenceDigests& d = static_cast<PipelineSequence*>(in.seq)->digests();
      for (size_t t = 0; t < in.tokens.size(); ++t, ++row)
        hash_row(d.out, version, hidden.subspan(row * H, H));
      d.rows += static_cast<int64_t>(in.tokens.size());
    }
    for (const SampleRequest& r : requests)
      ++static_cast<PipelineSequence*>(inputs[static_cast<size_t>(r.input)].seq)->digests().draws;
  }
  const uint64_t ticket = send_locked(encode_stage_pass(pass));
  const int64_t in_flight = ++in_flight_;
  if (in_flight > peak_in_flight_) peak_in_flight_ = in_flight;  // under mu_: no lost raise
  lock.unlock();  // the next micro-batch's head pass runs while this one is down the chain
  std::vector<uint8_t> answer;
  try {
    answer = await_answer(ticket);
  } catch (...) {
    --in_flight_;
    throw;
  }
  --in_flight_;
  StageSampled sampled;
  try {
    sampled = decode_stage_sampled(answer);
    STOA_CHECK(sampled.pass == pass.pass && sampled.tokens.size() == requests.size(),
               ErrorKind::kNetwork, "the last stage answered pass ", pass.pass, " with pass ",
               sampled.pass, " and ", sampled.tokens.size(), " tokens for ", requests.size(),
               " draws");
  } catch (const Error& e) {
    break_with(e.what());
  }
  return std::move(sampled.tokens);
}

}  // namespace stoa::engine
