#include "engine/batch_decoder.h"

#include <algorithm>

#include "core/error.h"

namespace stoa::engine {

BatchDecoder::BatchDecoder(EngineBackend& backend, int64_t slots, int64_t capacity)
    : backend_(backend), capacity_(capacity) {
  STOA_CHECK(slots > 0 && capacity > 0, ErrorKind::kInvalidArgument,
             "a batch decoder needs slots > 0 and capacity > 0, got ", slots, " and ", capacity);
  slots_.resize(static_cast<size_t>(slots));
}

BatchDecoder::Slot& BatchDecoder::slot_at(int64_t slot) {
  STOA_CHECK(slot >= 0 && slot < slots(), ErrorKind::kInvalidArgument, "slot ", slot,
             " out of range [0, ", slots(), ")");
  return slots_[static_cast<size_t>(slot)];
}

const BatchDecoder::Slot& BatchDecoder::slot_at(int64_t slot) const {
  STOA_CHECK(slot >= 0 && slot < slots(), ErrorKind::kInvalidArgument, "slot ", slot,
             " out of range [0, ", slots(), ")");
  return slots_[static_cast<size_t>(slot)];
}

int64_t BatchDecoder::active() const {
  return std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) {
    return s.state == State::kActive || s.state == State::kWaitingForFork ||
           s.state == State::kWaitingForPrefix;
  });
}

int64_t BatchDecoder::free_slots() const {
  return std::count_if(slots_.begin(), slots_.end(),
                       [](const Slot& s) { return s.state == State::kFree; });
}

bool BatchDecoder::is_free(int64_t slot) const {
  return slot_at(slot).state == State::kFree;
}
bool BatchDecoder::is_paused(int64_t slot) const {
  return slot_at(slot).state == State::kPaused;
}

const SequenceState& BatchDecoder::sequence(int64_t slot) const {
  const Slot& s = slot_at(slot);
  STOA_CHECK(s.seq != nullptr, ErrorKind::kInvalidArgument, "slot ", slot,
             " holds no sequence yet");
  return *s.seq;
}

int64_t BatchDecoder::take_free_slot() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state == State::kFree) return static_cast<int64_t>(i);
  }
  fail(ErrorKind::kInvalidArgument, "all ", slots_.size(), " decode slots are busy");
}

void BatchDecoder::arm(Slot& s, const GenerateOptions& options, uint64_t stream) {
  STOA_CHECK(options.max_tokens >= 1, ErrorKind::kInvalidArgument,
             "max_tokens must be >= 1 for a decode slot, got ", options.max_tokens);
  validate_sampling_params(options.sampling);
  s.sampler.emplace(options.sampling, options.seed, stream, options.draw);
  s.stop_tokens = options.stop_tokens;
  s.budget = options.max_tokens;
}

void BatchDecoder::set_sample_vocab(int64_t n) {
  STOA_CHECK(n >= 0 && n <= backend_.config().vocab_size, ErrorKind::kInvalidArgument,
             "sample vocabulary ", n, " outside [0, ", backend_.config().vocab_size, "]");
  sample_vocab_ = n;
}

void BatchDecoder::check_prompt(std::span<const int32_t> prompt) const {
  STOA_CHECK(!prompt.empty(), ErrorKind::kInvalidArgument,
             "a decode slot needs a non-empty prompt");
  STOA_CHECK(static_cast<int64_t>(prompt.size()) < capacity_, ErrorKind::kInvalidArgument,
             "a prompt of ", prompt.size(), " tokens does not fit a slot of capacity ", capacity_);
  const int32_t V = static_cast<int32_t>(backend_.config().vocab_size);
  for (size_t j = 0; j < prompt.size(); ++j) {
    STOA_CHECK(prompt[j] >= 0 && prompt[j] < V, ErrorKind::kInvalidArgument, "prompt token ", j,
               " has id ", prompt[j], ", outside the vocabulary [0, ", V, ")");
  }
}

BatchDecoder::Prefix& BatchDecoder::prefix_at(int64_t prefix) {
  STOA_CHECK(prefix >= 0 && prefix < static_cast<int64_t>(prefixes_.size()) &&
                 prefixes_[static_cast<size_t>(prefix)].live &&
                 !prefixes_[static_cast<size_t>(prefix)].dropped,
             ErrorKind::kInvalidArgument, "no prefix ", prefix);
  return prefixes_[static_cast<size_t>(prefix)];
}

int64_t BatchDecoder::add_prefix(std::span<const int32_t> prompt) {
  check_prompt(prompt);
  size_t id = 0;
  while (id < prefixes_.size() && prefixes_[id].live) ++id;
  if (id == prefixes_.size()) prefixes_.emplace_back();
  Prefix& p = prefixes_[id];
  p = Prefix{};
  p.live = true;
  p.seq = backend_.new_state(capacity_);  // holds the prompt only: not preallocated
  p.pending.assign(prompt.begin(), prompt.end() - 1);
  p.last = prompt.back();
  p.computed = p.pending.empty();
  return static_cast<int64_t>(id);
}

void BatchDecoder::fork_prefix(Slot& s, const Prefix& p) {
  s.seq = p.seq->fork_state();
  if (preallocate_) s.seq->preallocate();
  s.pending.assign(1, p.last);
  s.prefix = -1;
  s.state = State::kActive;
}

int64_t BatchDecoder::start_from_prefix(int64_t prefix, const GenerateOptions& options) {
  const Prefix& p = prefix_at(prefix);
  STOA_CHECK(free_slots() > 0, ErrorKind::kInvalidArgument, "all ", slots(),
             " decode slots are busy");
  const int64_t slot = take_free_slot();
  Slot& s = slots_[static_cast<size_t>(slot)];
  arm(s, options, options.stream);
  if (p.computed) {
    fork_prefix(s, p);
  } else {
    s.prefix = prefix;
    s.state = State::kWaitingForPrefix;
  }
  return slot;
}

void BatchDecoder::free_prefix_if_unused(int64_t prefix) {
  Prefix& p = prefixes_[static_cast<size_t>(prefix)];
  if (!p.live || !p.dropped) return;
  for (const Slot& s : slots_)
    if (s.state == State::kWaitingForPrefix && s.prefix == prefix) return;
  p = Prefix{};
}

void BatchDecoder::drop_prefix(int64_t prefix) {
  prefix_at(prefix).dropped = true;
  free_prefix_if_unused(prefix);
}

void BatchDecoder::pause(int64_t slot) {
  Slot& s = slot_at(slot);
  STOA_CHECK(s.state == State::kActive && s.seq != nullptr, ErrorKind::kInvalidArgument, "slot ",
             slot, " is not decoding");
  s.state = State::kPaused;
}

PipelineProof BatchDecoder::pipeline_proof(int64_t slot) {
  Slot& s = slot_at(slot);
  STOA_CHECK(s.seq != nullptr, ErrorKind::kInvalidArgument, "slot ", slot, " holds no sequence");
  return s.seq->pipeline_proof();
}

void BatchDecoder::discard(int64_t slot) {
  const int64_t prefix = slot_at(slot).prefix;
  for (const Slot& w : slots_)
    STOA_CHECK(w.state != State::kWaitingForFork || w.leader != slot, ErrorKind::kInvalidArgument,
               "slot ", slot, " leads a group whose forks are not taken yet");
  slots_[static_cast<size_t>(slot)] = Slot{};
  if (prefix >= 0) free_prefix_if_unused(prefix);
}

int64_t BatchDecoder::start(std::span<const int32_t> prompt, const GenerateOptions& options) {
  return start_group(prompt, 1, options).front();
}

std::vector<int64_t> BatchDecoder::start_group(std::span<const int32_t> prompt, int64_t n,
                                               const GenerateOptions& options) {
  STOA_CHECK(n >= 1 && n <= free_slots(), ErrorKind::kInvalidArgument, "a group of ", n,
             " needs that many free slots; ", free_slots(), " of ", slots(), " are free");
  check_prompt(prompt);
  std::vector<int64_t> out;
  const int64_t leader = take_free_slot();
  {
    Slot& s = slots_[static_cast<size_t>(leader)];
    arm(s, options, options.stream);
    s.seq = backend_.new_state(capacity_);
    if (preallocate_) s.seq->preallocate();
    s.pending.assign(prompt.begin(), prompt.end());
    s.state = State::kActive;
    out.push_back(leader);
  }
  for (int64_t i = 1; i < n; ++i) {
    const int64_t f = take_free_slot();
    Slot& s = slots_[static_cast<size_t>(f)];
    arm(s, options, options.stream + static_cast<uint64_t>(i));
    s.seq.reset();
    s.pending.clear();
    s.leader = leader;
    s.state = State::kWaitingForFork;
    out.push_back(f);
  }
  return out;
}

void BatchDecoder::resume(int64_t slot, std::span<const int32_t> tokens,
                          const GenerateOptions& options) {
  Slot& s = slot_at(slot);
  STOA_CHECK(s.state == State::kPaused, ErrorKind::kInvalidArgument, "slot ", slot,
             " is not paused (only a finished slot can take a new turn)");
  const int32_t V = static_cast<int32_t>(backend_.config().vocab_size);
  for (size_t j = 0; j < tokens.size(); ++j) {
    STOA_CHECK(tokens[j] >= 0 && tokens[j] < V, ErrorKind::kInvalidArgument, "token ", j,
               " has id ", tokens[j], ", outside the vocabulary [0, ", V, ")");
  }
  STOA_CHECK(
      s.seq->length() + static_cast<int64_t>(s.pending.size() + tokens.size()) < s.seq->capacity(),
      ErrorKind::kInvalidArgument, "slot ", slot, ": ", tokens.size(),
      " more tokens do not fit its capacity ", s.seq->capacity());
  // Keep the sampler (its stream carries on); take the new budget and stop tokens.
  STOA_CHECK(options.max_tokens >= 1, ErrorKind::kInvalidArgument, "max_tokens must be >= 1");
  s.stop_tokens = options.stop_tokens;
  s.budget = options.max_tokens;
  s.pending.insert(s.pending.end(), tokens.begin(), tokens.end());
  s.state = State::kActive;
}

std::unique_ptr<SequenceState> BatchDecoder::release(int64_t slot) {
  Slot& s = slot_at(slot);
  STOA_CHECK(s.state == State::kActive || s.state == State::kPaused, ErrorKind::kInvalidArgument,
             "slot ", slot, " holds no sequence to release");
  std::unique_ptr<SequenceState> seq = std::move(s.seq);
  s = Slot{};
  return seq;
}

SampleRequest BatchDecoder::request_for(int64_t i, size_t input, uint64_t position) {
  Slot& s = slots_[static_cast<size_t>(i)];
  SampleRequest r;
  r.input = input;
  r.params = s.sampler->params();
  r.uniform = s.sampler->draw(position);
  r.vocab = sample_vocab_;
  return r;
}

StepEvent BatchDecoder::take_sample(int64_t i, SampledToken sampled) {
  Slot& s = slots_[static_cast<size_t>(i)];
  StepEvent e;
  e.slot = i;
  e.sampled = std::move(sampled);
  --s.budget;
  e.stopped =
      std::find(s.stop_tokens.begin(), s.stop_tokens.end(), e.sampled.token) != s.stop_tokens.end();
  // The sampled token must still be fed; a slot whose cache is full cannot take it.
  const bool full = s.seq->length() + 1 >= s.seq->capacity();
  e.finished = e.stopped || s.budget <= 0 || full;
  s.pending.assign(1, e.sampled.token);
  if (e.finished) s.state = State::kPaused;
  return e;
}

std::vector<StepEvent> BatchDecoder::step() {
  std::vector<BackendInput> inputs;
  std::vector<int64_t> owner;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.state != State::kActive) continue;
    inputs.push_back({s.seq.get(), s.pending, Logits::kLast});
    owner.push_back(static_cast<int64_t>(i));
  }
  const size_t slot_inputs = inputs.size();
  std::vector<int64_t> computing;  // prefixes prefilled in this pass, after the slots' inputs
  for (size_t p = 0; p < prefixes_.size(); ++p) {
    Prefix& x = prefixes_[p];
    if (!x.live || x.computed) continue;
    inputs.push_back({x.seq.get(), x.pending, Logits::kNone});
    computing.push_back(static_cast<int64_t>(p));
  }
  std::vector<StepEvent> events;
  if (inputs.empty()) return events;
  // Every draw is made before the pass: a token goes in at index length() after it, the
  // position a positional draw is keyed by, and a fork waiting on a leader's prompt pass draws
  // from the leader's row at the same position. Forks first, as their events come first.
  std::vector<SampleRequest> requests;
  std::vector<int64_t> drawer;  // the slot of each request
  for (size_t k = 0; k < slot_inputs; ++k) {
    const int64_t i = owner[k];
    const Slot& leader = slots_[static_cast<size_t>(i)];
    const auto position = static_cast<uint64_t>(leader.seq->length()) + leader.pending.size();
    for (size_t f = 0; f < slots_.size(); ++f) {
      const Slot& w = slots_[f];
      if (w.state != State::kWaitingForFork || w.leader != i) continue;
      requests.push_back(request_for(static_cast<int64_t>(f), k, position));
      drawer.push_back(static_cast<int64_t>(f));
    }
    requests.push_back(request_for(i, k, position));
    drawer.push_back(i);
  }
  std::vector<SampledToken> sampled = backend_.forward_sampled(inputs, requests);
  // Slots waiting for a prefix computed in this pass fork it now and feed its last token next
  // step.
  for (const int64_t p : computing) {
    Prefix& x = prefixes_[static_cast<size_t>(p)];
    x.computed = true;
    x.pending.clear();
    for (Slot& w : slots_)
      if (w.state == State::kWaitingForPrefix && w.prefix == p) fork_prefix(w, x);
    free_prefix_if_unused(p);
  }
  for (size_t r = 0; r < requests.size(); ++r) {
    const int64_t i = drawer[r];
    Slot& s = slots_[static_cast<size_t>(i)];
    if (s.state == State::kWaitingForFork) {
      // A fork copies its leader's state, final for this pass, before the leader's pending
      // token changes meaning (the leader's request comes after its forks').
      s.seq = slots_[static_cast<size_t>(s.leader)].seq->fork_state();
      s.state = State::kActive;
      s.leader = -1;
    }
    events.push_back(take_sample(i, std::move(sampled[r])));
  }
  std::sort(events.begin(), events.end(),
            [](const StepEvent& a, const StepEvent& b) { return a.slot < b.slot; });
  return events;
}

}  // namespace stoa::engine
