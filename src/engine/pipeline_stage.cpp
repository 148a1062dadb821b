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
      } else {
        sequences_.emplace(c.seq, sequence(c.source).fork());
      }
      break;
    }
    case StageFrameKind::kClose:
      sequences_.erase(c.seq);  // closing twice is harmless (a retried close)
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
    return {false, encode_stage_sampled(out)};
  }
  StagePass down;
  down.pass = p.pass;
  down.hidden = p.hidden;
  down.requests = p.requests;
  down.inputs = p.inputs;
  const std::span<const float> hidden = runner_.pass_hidden();
  down.rows.assign(hidden.begin(), hidden.end());
  return {true, encode_stage_pass(down)};
}

std::vector<uint8_t> PipelineStage::forward_down(std::span<const uint8_t> frame) {
  bytes_sent_ += static_cast<int64_t>(frame.size());
  std::vector<uint8_t> answer = next_->exchange(frame);
  bytes_received_ += static_cast<int64_t>(answer.size());
  return answer;
}

}  // namespace stoa::engine
