#include "roles/worker/rollout_record.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace stoa::worker {

RolloutRecord::RolloutRecord(const net::Lease& lease, std::string worker_id, int32_t topk) {
  STOA_CHECK(!lease.prompt_tokens.empty(), ErrorKind::kInvalidArgument, "lease ", lease.lease_id,
             ": empty prompt");
  STOA_CHECK(topk >= 0, ErrorKind::kInvalidArgument, "rollout: negative top-K ", topk);
  sub_.id = net::random_uuid();
  sub_.worker_id = std::move(worker_id);
  sub_.lease_id = lease.lease_id;
  sub_.group_id = lease.group_id;
  sub_.prompt_id = lease.prompt_id;
  sub_.topk = topk;
  add_observation(lease.prompt_tokens);
}

void RolloutRecord::add_generated(int32_t token, float logprob, uint64_t version,
                                  std::span<const int32_t> topk_ids,
                                  std::span<const float> topk_logprobs) {
  STOA_CHECK(std::isfinite(logprob) && logprob <= 0.0f, ErrorKind::kInvalidArgument, "rollout ",
             sub_.id, ": token ", sub_.tokens.size(), " has log-prob ", logprob,
             " (must be finite and <= 0)");
  const size_t k = static_cast<size_t>(sub_.topk);
  // The hub wants exactly K (id, log-prob) pairs per position; a sampler whose support is
  // smaller than K reports fewer, and the caller pads (the rule lives where K is known).
  STOA_CHECK(topk_ids.size() == k && topk_logprobs.size() == k, ErrorKind::kInvalidArgument,
             "rollout ", sub_.id, ": top-K row of ", topk_ids.size(), " ids / ",
             topk_logprobs.size(), " log-probs, K=", k);
  sub_.tokens.push_back(token);
  sub_.mask.push_back(1);
  sub_.logprobs.push_back(logprob);
  sub_.versions.push_back(version);
  sub_.topk_ids.insert(sub_.topk_ids.end(), topk_ids.begin(), topk_ids.end());
  sub_.topk_logprobs.insert(sub_.topk_logprobs.end(), topk_logprobs.begin(), topk_logprobs.end());
  ++generated_;
}

void RolloutRecord::add_observation(std::span<const int32_t> tokens) {
  const size_t k = static_cast<size_t>(sub_.topk);
  for (int32_t t : tokens) {
    sub_.tokens.push_back(t);
    sub_.mask.push_back(0);
    sub_.logprobs.push_back(0.0f);
    sub_.versions.push_back(0);
    for (size_t i = 0; i < k; ++i) {
      sub_.topk_ids.push_back(t);
      sub_.topk_logprobs.push_back(0.0f);
    }
  }
}

void RolloutRecord::truncate(size_t n) {
  if (n >= sub_.tokens.size()) return;
  const size_t k = static_cast<size_t>(sub_.topk);
  for (size_t i = n; i < sub_.tokens.size(); ++i) generated_ -= sub_.mask[i];
  sub_.tokens.resize(n);
  sub_.mask.resize(n);
  sub_.logprobs.resize(n);
  sub_.versions.resize(n);
  sub_.topk_ids.resize(n * k);
  sub_.topk_logprobs.resize(n * k);
}

uint64_t RolloutRecord::oldest_version() const {
  STOA_CHECK(generated_ > 0, ErrorKind::kInvalidArgument, "rollout ", sub_.id,
             ": no generated tokens");
  uint64_t oldest = UINT64_MAX;
  for (size_t i = 0; i < sub_.tokens.size(); ++i)
    if (sub_.mask[i]) oldest = std::min(oldest, sub_.versions[i]);
  return oldest;
}

net::RolloutSubmission RolloutRecord::finish(const std::vector<int32_t>* expected_tokens) const {
  if (expected_tokens)
    STOA_CHECK(*expected_tokens == sub_.tokens, ErrorKind::kInternal, "rollout ", sub_.id,
               ": record holds ", sub_.tokens.size(), " tokens, the episode ",
               expected_tokens->size(), " (or they differ)");
  net::RolloutSubmission out = sub_;
  out.answer = answer_;
  out.turns = turns_;
  out.timings = timings_;
  net::validate_structure(out);
  return out;
}

}  // namespace stoa::worker
