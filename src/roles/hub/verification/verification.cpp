// Replay verification on the hub (docs/design/verification.md): lease seeds, the seed check at
// intake, which accepted rollouts are replayed, groups held back from the trainer until their
// verdicts, and quarantine on a failing verdict. The peer checks are verification_peer.cpp.
#include "roles/hub/verification/verification.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/log.h"
#include "core/rng.h"
#include "roles/hub/observe/hub_counters.h"
#include "roles/hub/request_error.h"
#include "roles/hub/verification/verification_state.h"

namespace stoa::hub {

Verification::Verification(VerificationParts parts) : parts_(parts) {}
Verification::~Verification() = default;

void Verification::set_auditor(RolloutAuditor* auditor) {
  if (!auditor) {
    state_.reset();
    return;
  }
  const uint64_t seed =
      Rng(hash_bytes(parts_.config.join_token.data(), parts_.config.join_token.size()).low ^
              static_cast<uint64_t>(now()),
          parts_.config.seed)
          .next();
  if (state_) {
    state_->auditor = auditor;
    return;
  }
  state_ = std::make_unique<VerificationState>(auditor, seed);
  state_->started_ms = now();
  for (const auto& [worker, why] : parts_.ledger.reader().quarantined()) {
    state_->quarantined.insert(worker);
    log_info("verify", "worker ", worker, " stays quarantined: ", why);
  }
}

bool Verification::quarantined(const std::string& worker_id) const {
  return state_ && state_->quarantined.count(worker_id);
}

// Seeds are a function of the lease id (random, issued by the hub) and the run's seed, so a
// restarted hub gives the same seeds for the leases it restores and needs to store nothing.
std::vector<uint64_t> Verification::lease_seeds(const std::string& lease_id,
                                                int32_t samples) const {
  if (!state_) return {};
  Rng rng(hash_bytes(lease_id.data(), lease_id.size()).low, parts_.config.seed);
  std::vector<uint64_t> seeds(static_cast<size_t>(std::max(0, samples)));
  for (uint64_t& s : seeds) s = rng.next();
  return seeds;
}

std::optional<env::RolloutRejection> Verification::check_seed(const net::RolloutSubmission& m,
                                                              const LeaseRow& lease) {
  if (!state_) return std::nullopt;
  const std::string who = cat("rollout ", m.id);
  if (!m.seed)
    return env::RolloutRejection{
        "bad_seed", cat(who, ": no sampling seed (the lease gave ", lease.samples, ")")};
  VerificationState& v = *state_;
  if (lease.issued_ms <= v.started_ms && v.seeds_restored.insert(lease.id).second) {
    for (const auto& row : parts_.ledger.rollouts_of_group(lease.group_id)) {
      if (row.lease_id != lease.id) continue;
      try {
        const auto j = nlohmann::json::parse(row.payload);
        if (j.contains("seed") && j.at("seed").is_number_unsigned())
          v.seeds_used[lease.id].insert(j.at("seed").get<uint64_t>());
      } catch (const nlohmann::json::exception& e) {
        log_warn("verify", "rollout ", row.id, ": unreadable payload in the ledger: ", e.what());
      }
    }
  }
  const std::vector<uint64_t> seeds = lease_seeds(lease.id, lease.samples);
  if (std::find(seeds.begin(), seeds.end(), *m.seed) == seeds.end())
    return env::RolloutRejection{
        "bad_seed", cat(who, ": seed ", *m.seed, " is not one of lease ", lease.id, "'s")};
  if (v.seeds_used[lease.id].count(*m.seed))
    return env::RolloutRejection{
        "bad_seed", cat(who, ": seed ", *m.seed, " was already used on lease ", lease.id)};
  return std::nullopt;
}

void Verification::audit(const net::RolloutSubmission& m, const GroupState& g,
                         size_t prompt_length) {
  if (!state_) return;
  VerificationState& v = *state_;
  if (m.seed) v.seeds_used[m.lease_id].insert(*m.seed);
  const auto& w = parts_.workers[m.worker_id];
  const bool mandatory = w.rollouts_accepted <= parts_.config.verify.first_rollouts;
  const bool peer = parts_.config.verify.peer;
  if (!mandatory && !peer && !v.sampler.chance(parts_.config.verify.fraction)) return;
  AuditJob job;
  job.rollout = m;
  job.problem = parts_.deps.prompts.at(static_cast<size_t>(g.row.prompt_index));
  job.prompt_length = prompt_length;
  // With peer checks every rollout is checked: a new worker's first ones by the trusted replay
  // (they also earn it its checking rights), the rest by a peer (peer_checks.cpp).
  if (peer && !mandatory) return enqueue_check(std::move(job), g);
  if (peer) v.note_canary_candidate(job, w.token_name, w.address, "", now(), parts_.config.verify);
  if (peer && !v.auditor->enqueue(job)) return enqueue_check(std::move(job), g);
  v.pending[m.id] = {g.row.id, m.worker_id, m.kernel_target,
                     now() + parts_.config.verify.max_wait_ms};
  if (peer || (v.backlog.empty() && v.auditor->enqueue(job))) return;
  // Sampled mode fails closed: a rollout due for replay that the replay's queue cannot take
  // waits in the backlog (behind those already there) with its group held, and is handed over
  // as the queue drains (sweep); past max_wait_s its group is dropped. Were it skipped, a flood
  // of the queue would let exactly the rollouts chosen for checking train unchecked.
  if (v.backlog.size() >= parts_.config.verify.max_peer_jobs) {
    // Memory is bounded: a rollout that can be neither replayed nor kept waiting does not train.
    ++v.skipped_queue_full;
    log_warn("verify", "rollout ", m.id, " cannot be replayed (the replay's queue is full and ",
             v.backlog.size(), " more wait): its group is dropped");
    drop_group(g.row.id, "unchecked");
    return;
  }
  v.pending[m.id].backlogged = true;
  v.backlog.emplace_back(m.id, std::move(job));
}

bool Verification::held_for_verdict(const std::string& group_id) {
  if (!state_) return false;
  VerificationState& v = *state_;
  bool waiting = false, overdue = false;
  for (const auto& [id, p] : v.pending) {
    if (p.group_id != group_id) continue;
    waiting = true;
    overdue |= now() >= p.deadline_ms;
  }
  if (!waiting || !overdue) return waiting;
  bool backlogged = false;  // see Pending::backlogged
  for (auto it = v.pending.begin(); it != v.pending.end();) {
    if (it->second.group_id != group_id) {
      ++it;
      continue;
    }
    ++v.timeouts;
    backlogged |= it->second.backlogged;
    state_->forget_check(it->first);
    it = v.pending.erase(it);
  }
  if (parts_.config.verify.train_on_timeout && !parts_.config.verify.peer && !backlogged)
    return false;
  parts_.ledger.write([group_id](Ledger& l) {
    l.set_group_status(group_id, GroupStatus::kDropped, -1, "verify_timeout");
  });
  parts_.book.groups().at(group_id).row.status = GroupStatus::kDropped;
  parts_.book.groups().at(group_id).row.drop_reason = "verify_timeout";
  parts_.counters.dropped["verify_timeout"]++;
  return true;
}

void Verification::record_verdict(const std::string& rollout_id, const AuditVerdict& verdict) {
  if (!state_) return;
  VerificationState& v = *state_;
  v.cpu_seconds += verdict.cpu_seconds;
  auto it = v.pending.find(rollout_id);
  std::string worker, kernel_target, group_id;
  if (it != v.pending.end()) {
    worker = it->second.worker_id;
    kernel_target = it->second.kernel_target;
    group_id = it->second.group_id;
    v.pending.erase(it);
  } else if (auto row = parts_.ledger.rollout(rollout_id)) {
    worker = row->worker_id;  // its group timed out meanwhile: the verdict still counts
    group_id = row->group_id;
    const auto j = nlohmann::json::parse(row->payload, nullptr, false);
    if (j.is_object() && j.contains("kernel_target") && j["kernel_target"].is_string())
      kernel_target = j["kernel_target"].get<std::string>();
  }
  if (!verdict.pass && verdict.what == kEnvironmentVerdict) {
    // The run's task failed during the replay (an environment down or contradicting itself):
    // nothing is known against the worker, and nothing is known for the rollout either, so its
    // group is not trained.
    ++v.environment_failures;
    log_warn("verify", "rollout ", rollout_id, " of worker ", worker,
             " could not be replayed: the run's task failed: ", verdict.detail);
    if (!group_id.empty()) drop_group(group_id, "environment");
  } else if (!verdict.pass && verdict.what == kUnreplayableVerdict) {
    // The weights of a version the rollout names are gone from the blob store: it waited for
    // its replay past the staleness window the store keeps (intake refuses it from then on).
    // The hub's own limit, so nothing against the worker; unverified, its group is not trained.
    ++v.unreplayable;
    log_warn("verify", "rollout ", rollout_id, " of worker ", worker,
             " aged out before its replay (its group is dropped): ", verdict.detail);
    if (!group_id.empty()) drop_group(group_id, "unreplayable");
  } else {
    v.count(kernel_target, verdict.pass);
    if (verdict.pass && !worker.empty()) v.credit_rollout(worker);
  }
  if (auto liar = v.judge_checker(rollout_id, verdict)) quarantine(liar->first, liar->second);
  v.judge_canary_candidate(rollout_id, verdict.pass);
  if (!verdict.pass && !verdict_blames_nobody(verdict)) {
    log_error("verify", "rollout ", rollout_id, " of worker ", worker,
              " FAILED replay at position ", verdict.position, " (", verdict.what,
              "): ", verdict.detail);
    const std::string blamed = blamed_worker(rollout_id, worker, verdict);
    if (!blamed.empty())
      quarantine(
          blamed,
          cat("rollout ", rollout_id, " failed replay at position ", verdict.position, " (",
              verdict.what, ")",
              blamed == worker ? "" : cat(": its pipeline stage ", verdict.blame_stage, " lied")));
    // A stage lied, not the submitter: quarantining the stage drops no group of the head's, so
    // the groups holding what this pipeline group computed go here (the liar was in all of it).
    if (blamed != worker) drop_pipeline_groups(pipeline_group_of(rollout_id), group_id);
  }
}

uint64_t Verification::pipeline_group_of(const std::string& rollout_id) const {
  const auto row = parts_.ledger.rollout(rollout_id);
  if (!row) return 0;
  const auto j = nlohmann::json::parse(row->payload, nullptr, false);
  if (!j.is_object() || !j.contains("pipeline_group") || !j["pipeline_group"].is_number_unsigned())
    return 0;
  return j["pipeline_group"].get<uint64_t>();
}

void Verification::drop_pipeline_groups(uint64_t pipeline_group, const std::string& group_id) {
  if (!group_id.empty()) drop_group(group_id, "quarantined");
  if (pipeline_group == 0) return;
  drop_groups_holding([pipeline_group](const RolloutRow& row) {
    const auto j = nlohmann::json::parse(row.payload, nullptr, false);
    return j.is_object() && j.value("pipeline_group", uint64_t{0}) == pipeline_group;
  });
}

void Verification::drop_groups_holding(const std::function<bool(const RolloutRow&)>& rollout) {
  std::vector<std::string> drop;
  for (const auto& [gid, g] : parts_.book.groups()) {
    if (g.row.status == GroupStatus::kTrained || g.row.status == GroupStatus::kDropped ||
        parts_.taken.count(gid))
      continue;
    for (const auto& row : parts_.ledger.rollouts_of_group(gid)) {
      if (rollout(row)) {
        drop.push_back(gid);
        break;
      }
    }
  }
  for (const auto& gid : drop) drop_group(gid, "quarantined");
}

std::string Verification::blamed_worker(const std::string& rollout_id, const std::string& submitter,
                                        const AuditVerdict& verdict) const {
  if (verdict.blame_stage <= 0 || !signers_) return submitter;  // -1: no group; 0: the head
  const uint64_t pipeline_group = pipeline_group_of(rollout_id);
  if (pipeline_group == 0) return submitter;
  const auto signers = signers_(pipeline_group);
  // The group's stages are known for kSignersKept groups: past that the blame cannot be
  // placed and the submitter answers for its group, as before stages committed.
  if (!signers || static_cast<size_t>(verdict.blame_stage) >= signers->workers.size()) {
    log_warn("verify", "rollout ", rollout_id, " blames stage ", verdict.blame_stage,
             " of a pipeline group the hub no longer knows: its head answers for it");
    return submitter;
  }
  return signers->workers[static_cast<size_t>(verdict.blame_stage)];
}

// Refuses the worker's session from now on and drops every group holding one of its rollouts
// that the trainer has not taken (groups already handed to the trainer are past recall).
void Verification::quarantine(const std::string& worker_id, const std::string& why) {
  VerificationState& v = *state_;
  if (!v.quarantined.insert(worker_id).second) return;
  log_error("verify", "worker ", worker_id, " quarantined: ", why);
  // Its checks in hand go back to the queue for another checker.
  for (auto& [rollout_id, p] : v.peer_jobs) {
    if (p.checker != worker_id) continue;
    state_->end_check_lease(rollout_id, true);
    p.stage_deadline_ms = now() + parts_.config.verify.peer_wait_ms;
  }
  v.drop_canaries_of(worker_id);
  parts_.ledger.write([worker_id, why, at = now()](Ledger& l) {
    l.put_quarantine(worker_id, why, at);  // a restarted hub keeps refusing it
  });
  drop_groups_holding([&worker_id](const RolloutRow& row) { return row.worker_id == worker_id; });
}

// Drops a group the trainer has not taken (one already handed over is past recall), durably,
// and forgets the verdicts it waited for.
void Verification::drop_group(const std::string& group_id, const std::string& reason) {
  auto g = parts_.book.groups().find(group_id);
  if (g == parts_.book.groups().end() || g->second.row.status == GroupStatus::kTrained ||
      g->second.row.status == GroupStatus::kDropped || parts_.taken.count(group_id))
    return;
  parts_.ledger.write([group_id, reason](Ledger& l) {
    l.set_group_status(group_id, GroupStatus::kDropped, -1, reason);
  });
  g->second.row.status = GroupStatus::kDropped;
  g->second.row.drop_reason = reason;
  parts_.counters.dropped[reason]++;
  VerificationState& v = *state_;
  for (auto it = v.pending.begin(); it != v.pending.end();) {
    if (it->second.group_id != group_id) {
      ++it;
      continue;
    }
    state_->forget_check(it->first);
    it = v.pending.erase(it);
  }
}

void Verification::add_counters(std::map<std::string, double>& m) const {
  if (state_) state_->add_counters(m, parts_.config.verify.peer);
}

void Verification::caught(const std::string& worker_id, const std::string& kernel_target,
                          const std::string& why) {
  if (!state_) return;
  state_->count(kernel_target, false);
  quarantine(worker_id, why);
}

std::optional<env::QaItem> Verification::checked_problem(const std::string& worker_id,
                                                         const std::string& prompt_id) const {
  if (!state_) return std::nullopt;
  return state_->checked_problem(worker_id, prompt_id);
}

}  // namespace stoa::hub
