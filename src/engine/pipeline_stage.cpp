#include "engine/pipeline_stage.h"

#include "core/error.h"

namespace stoa::engine {

uint64_t LocalStageLink::send(std::span<const uint8_t> frame) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  answers_.emplace(ticket, next_.handle(frame));
  return ticket;
}

std::vector<uint8_t> LocalStageLink::await(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = answers_.find(ticket);
  STOA_CHECK(it != answers_.end(), ErrorKind::kInternal, "no answer for ticket ", ticket);
  std::vector<uint8_t> answer = std::move(it->second);
  answers_.erase(it);
  return answer;
}

PipelineStage::PipelineStage(std::unique_ptr<EngineWeights> weights,
                             std::unique_ptr<StageLink> next, ThreadPool* pool,
                             int64_t max_sequences)
    : runner_(std::move(weights), pool), next_(std::move(next)), max_sequences_(max_sequences) {
  const ModelConfig& c = runner_.config();
  STOA_CHECK(!span().embeds(), ErrorKind::kInvalidArgument,
             "a pipeline stage after the head holds ", span_string(c, span()),
             ": the layers from 0 are the head's");
  STOA_CHECK(next_ == nullptr || !span().heads(c), ErrorKind::kInvalidArgument, "the stage of ",
             span_string(c, span()), " ends the model and has no next stage");
  STOA_CHECK(max_sequences_ > 0, ErrorKind::kInvalidArgument, "a stage needs room for a sequence");
}

std::vector<uint8_t> PipelineStage::handle(std::span<const uint8_t> frame) {
  StageOutcome outcome = process(frame);
  if (!outcome.forward) return std::move(outcome.bytes);
  try {
    STOA_CHECK(next_ != nullptr, ErrorKind::kInternal, "no link to the next stage");
    return forward_down(outcome.bytes);
  } catch (const Error& e) {
    return encode_stage_error(cat("stage ", span_string(runner_.config(), span()), ": ", e.what()));
  }
}

StageOutcome PipelineStage::process(std::span<const uint8_t> frame) {
  try {
    const StageFrameKind kind = stage_frame_kind(frame);
    if (kind == StageFrameKind::kPass) return pass(decode_stage_pass(frame));
    if (kind == StageFrameKind::kWeights) return use_weights(decode_stage_weights(frame));
    if (kind == StageFrameKind::kCommit) return commit(decode_stage_commit(frame));
    control(decode_stage_control(frame));
    if (span().heads(runner_.config())) return {false, encode_stage_done()};
    return {true, std::vector<uint8_t>(frame.begin(), frame.end())};
  } catch (const Error& e) {
    return {false, encode_stage_error(
                       cat("stage ", span_string(runner_.config(), span()), ": ", e.what()))};
  }
}

Sequence& PipelineStage::sequence(uint64_t id) {
  auto it = sequences_.find(id);
  STOA_CHECK(it != sequences_.end(), ErrorKind::kNotFound, "no sequence ", id);
  return it->second;
}

void PipelineStage::control(const StageControl& c) {
  switch (c.kind) {
    case StageFrameKind::kOpen:
    case StageFrameKind::kFork: {
      STOA_CHECK(sequences_.count(c.seq) == 0, ErrorKind::kInvalidArgument, "sequence ", c.seq,
                 " is open already");
      STOA_CHECK(live_sequences() < max_sequences_, ErrorKind::kInvalidArgument, "already ",
                 live_sequences(), " sequences open, the stage's bound");
      if (c.kind == StageFrameKind::kOpen) {
        sequences_.emplace(c.seq, runner_.new_sequence(c.capacity));
        digests_.emplace(c.seq, SequenceDigests{});
      } else {
        sequences_.emplace(c.seq, sequence(c.source).fork());
        digests_.emplace(c.seq, digests_.at(c.source));  // the parent's rows are the fork's
      }
      break;
    }
    case StageFrameKind::kClose:
      sequences_.erase(c.seq);  // closing twice is harmless (a retried close)
      digests_.erase(c.seq);
      break;
    case StageFrameKind::kReserve:
      sequence(c.seq).preallocate();
      break;
    default:
      fail(ErrorKind::kInvalidArgument, "not a control frame");
  }
}

// The version goes on down as this stage holds it, so a stage that is ahead brings the ones
// after it along, and the last answers with the version the whole chain must then take.
StageOutcome PipelineStage::use_weights(uint64_t version) {
  const uint64_t held = weights_ ? weights_->bring_to(version) : version;
  version_ = held;
  return {!span().heads(runner_.config()), encode_stage_weights(held)};
}

StageOutcome PipelineStage::pass(const StagePass& p) {
  const ModelConfig& c = runner_.config();
  std::shared_lock<std::shared_mutex> weights_held;
  if (weights_) {
    weights_held = weights_->pass_lock();
    STOA_CHECK(version_.has_value(), ErrorKind::kInvalidArgument, "pass ", p.pass,
               " before the head named its weights version");
    const uint64_t held = weights_->version();
    STOA_CHECK(held == *version_, ErrorKind::kInvalidArgument, "pass ", p.pass,
               ": this stage's weights are version ", held, ", the pipeline's ", *version_,
               " (an anchor replaced them): the head must switch first");
  }
  STOA_CHECK(p.hidden == c.hidden_size, ErrorKind::kInvalidArgument, "pass ", p.pass,
             " carries hidden states of width ", p.hidden, ", the model's is ", c.hidden_size);
  inputs_.clear();
  for (const StagePassInput& in : p.inputs) {
    Sequence& seq = sequence(in.seq);
    STOA_CHECK(seq.length() == in.position, ErrorKind::kInvalidArgument, "pass ", p.pass,
               ": sequence ", in.seq, " holds ", seq.length(), " tokens here but the pass starts",
               " at position ", in.position, " (a stage out of step)");
    inputs_.push_back({&seq, in.tokens, in.logits});
  }
  const bool last = span().heads(c);
  if (last) check_sample_requests(std::span<const SequenceInput>(inputs_), std::span(p.requests));
  const PassLogits logits = runner_.append_batch_stage(inputs_, p.rows.data());
  if (last) {
    StageSampled out;
    out.pass = p.pass;
    out.tokens = sample_requests(logits, p.requests);
    digest_pass(p, {}, out.tokens);
    return {false, encode_stage_sampled(out)};
  }
  StagePass down;
  down.pass = p.pass;
  down.hidden = p.hidden;
  down.requests = p.requests;
  down.inputs = p.inputs;
  const std::span<const float> hidden = runner_.pass_hidden();
  down.rows.assign(hidden.begin(), hidden.end());
  digest_pass(p, down.rows, {});
  return {true, encode_stage_pass(down)};
}

void PipelineStage::digest_pass(const StagePass& p, std::span<const float> sent,
                                std::span<const SampledToken> drawn) {
  const uint64_t version = version_.value_or(0);
  const size_t H = static_cast<size_t>(p.hidden);
  size_t row = 0;
  for (const StagePassInput& in : p.inputs) {
    SequenceDigests& d = digests_.at(in.seq);
    for (size_t t = 0; t < in.tokens.size(); ++t, ++row) {
      hash_row(d.in, version, std::span<const float>(p.rows).subspan(row * H, H));
      if (!sent.empty()) hash_row(d.out, version, sent.subspan(row * H, H));
    }
    d.rows += static_cast<int64_t>(in.tokens.size());
  }
  for (size_t i = 0; i < drawn.size(); ++i) {
    SequenceDigests& d = digests_.at(p.inputs[static_cast<size_t>(p.requests[i].input)].seq);
    hash_draw(d.out, version, drawn[i]);
    ++d.draws;
  }
}

// The chain so far ends with the stage before this one: what it says it sent must be what this
// stage received, or one of the two lies (or the link tore) — refused, so no rollout carries a
// broken chain; the head breaks the pipeline and names this stage's predecessor.
StageOutcome PipelineStage::commit(StageCommit c) {
  STOA_CHECK(commit_key_.has_value(), ErrorKind::kInvalidArgument,
             "this stage holds no group key (it was not placed by a hub): it commits to nothing");
  (void)sequence(c.seq);  // kNotFound, naming it
  const SequenceDigests& d = digests_.at(c.seq);
  STOA_CHECK(!c.chain.empty() && c.chain.back().stage == stage_index_ - 1,
             ErrorKind::kInvalidArgument, "a commit frame for sequence ", c.seq, " whose chain of ",
             c.chain.size(), " does not end with stage ", stage_index_ - 1);
  StageCommitment own = d.commitment(stage_index_, span().last, /*head=*/false);
  const StageCommitment& before = c.chain.back();
  STOA_CHECK(before.out == own.in && before.rows == own.rows, ErrorKind::kIntegrity, "stage ",
             before.stage, " committed to sending ", before.rows, " rows of sequence ", c.seq,
             " other than the ", own.rows, " this stage received");
  if (!span().heads(runner_.config())) own.draws = 0;
  sign_commitment(*commit_key_, group_id_, own);
  c.chain.push_back(own);
  return {!span().heads(runner_.config()), encode_stage_commit(c)};
}

std::vector<uint8_t> PipelineStage::forward_down(std::span<const uint8_t> frame) {
  bytes_sent_ += static_cast<int64_t>(frame.size());
  std::vector<uint8_t> answer = next_->exchange(frame);
  bytes_received_ += static_cast<int64_t>(answer.size());
  return answer;
}

}  // namespace stoa::engine
