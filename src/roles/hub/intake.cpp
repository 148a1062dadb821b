// Rollout intake (POST /v1/rollouts) and the TrainerPort side of the Hub: validation against the
// lease, the vocabulary, the published versions and the staleness window; the reward recomputed
// from the transcript; the durable insert; complete groups handed to the trainer loop.
#include <algorithm>
#include <cmath>

#include "core/log.h"
#include "roles/hub/http/trainer_wire.h"
#include "roles/hub/hub.h"
#include "roles/hub/observe/hub_counters.h"
#include "roles/hub/submission_check.h"
#include "roles/hub/verification/verification.h"

namespace stoa::hub {

using nlohmann::json;

namespace {
AcceptedRollout accepted_from_row(const RolloutRow& row) {
  auto sub = net::rollout_submission_from_json(json::parse(row.payload));
  AcceptedRollout r;
  r.id = sub.id;
  r.worker_id = sub.worker_id;
  r.tokens = std::move(sub.tokens);
  r.mask = std::move(sub.mask);
  r.logprobs = std::move(sub.logprobs);
  r.versions = std::move(sub.versions);
  r.topk = sub.topk;
  r.topk_ids = std::move(sub.topk_ids);
  r.topk_logprobs = std::move(sub.topk_logprobs);
  r.reward = row.reward;
  r.min_version = row.min_version;
  r.max_version = row.max_version;
  return r;
}
}  // namespace

net::RolloutResponse Hub::reject(const std::string& reason, const std::string& detail) {
  counters_->rejected[reason]++;
  net::RolloutResponse r;
  r.status = net::IntakeStatus::kRejected;
  r.reason = reason;
  r.detail = detail;
  return r;
}

net::RolloutResponse Hub::submit(const std::string& caller, const net::RolloutSubmission& m,
                                 const std::string& peer) {
  if (m.worker_id != caller) {
    throw RequestError(403, cat("rollout '", m.id, "': worker_id '", m.worker_id,
                                "' does not match the session token's worker"));
  }
  net::validate_structure(m);  // decoders already did; callers may build messages themselves
  std::string payload = net::to_json(m).dump();  // what the ledger stores; no lock needed
  net::RolloutResponse response;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    identity_.throttle(Identity::Limit::kRolloutsPerWorker, caller, "rollouts (this worker)");
    if (!peer.empty())
      identity_.throttle(Identity::Limit::kRolloutsPerAddress, peer, "rollouts (this address)");
    verification_->note_address(caller, peer);
    ledger_->reserve();
    response = intake_locked(caller, m, std::move(payload));
    ticket = ledger_->written();
  }
  // "accepted" (and "duplicate", and a rejection that counted an accepted rollout still in the
  // queue) only once what the answer rests on is durable — waited for without the hub's mutex,
  // while other requests go on and this write's group commit gathers more.
  ledger_->wait_durable(ticket);
  return response;
}

net::RolloutResponse Hub::intake_locked(const std::string& caller, const net::RolloutSubmission& m,
                                        std::string payload) {
  const std::string who = cat("rollout ", m.id);
  // Idempotency first: a retry of an accepted rollout is a duplicate even if its lease has
  // since expired or its group was trained.
  if (auto prev = ledger_->rollout(m.id)) {
    // Another worker's rollout id: a replay of someone else's work (verification.cpp).
    if (verification_->on() && prev->worker_id != caller) {
      verification_->caught(caller, m.kernel_target,
                            cat(who, " was accepted from worker ", prev->worker_id));
      return reject("rollout_id_taken", cat(who, ": accepted from another worker"));
    }
    counters_->duplicate++;
    net::RolloutResponse r;
    r.status = net::IntakeStatus::kDuplicate;
    r.reward = prev->reward;
    return r;
  }
  // Everything but the hub's memory of earlier submissions: a pure check (submission_check.h).
  IntakeSnapshot snapshot;
  auto lit = book_.leases().find(m.lease_id);
  GroupState* g = nullptr;
  if (lit != book_.leases().end()) {
    snapshot.lease = &lit->second;
    if (auto git = book_.groups().find(lit->second.group_id); git != book_.groups().end()) {
      g = &git->second;
      snapshot.group = &g->row;
      snapshot.group_accepted = g->accepted;
      // Rendered when its group was leased, except for a group restored by a restart.
      snapshot.prompt = [this, g]() -> const std::vector<int32_t>& {
        return prompts_.render_here(g->row.prompt_index);
      };
      snapshot.golden_answers =
          &deps_.prompts.at(static_cast<size_t>(g->row.prompt_index)).golden_answers;
    }
  }
  snapshot.published = [this](uint64_t v) { return versions_.published(v); };
  snapshot.latest_version = versions_.latest_published();
  snapshot.max_staleness = config_.max_staleness;
  snapshot.limits = env::RolloutLimits{deps_.vocab_size, config_.max_tokens, config_.topk};
  snapshot.codec = deps_.codec;
  snapshot.task = deps_.task;
  SubmissionVerdict verdict = check_submission(caller, m, snapshot);
  if (auto* refused = std::get_if<env::RolloutRejection>(&verdict))
    return reject(refused->reason, refused->detail);
  const SubmissionAccepted& ok = std::get<SubmissionAccepted>(verdict);
  const LeaseRow& lease = lit->second;
  if (auto refused = verification_->check_seed(m, lease))
    return reject(refused->reason, refused->detail);
  if (auto refused = check_pipeline_proof_locked(caller, m)) return *refused;
  const double reward = ok.reward;
  const uint64_t vmin = ok.min_version, vmax = ok.max_version, latest = snapshot.latest_version;
  const int64_t n = static_cast<int64_t>(m.tokens.size());
  const int64_t model_tokens = ok.model_tokens;

  RolloutRow row;
  row.id = m.id;
  row.group_id = g->row.id;
  row.lease_id = m.lease_id;
  row.worker_id = caller;
  row.reward = reward;
  row.min_version = vmin;
  row.max_version = vmax;
  row.tokens = n;
  row.accepted_ms = now();
  const int64_t row_accepted_ms = row.accepted_ms;
  row.payload = std::move(payload);
  const bool completes = g->accepted + 1 >= g->row.samples;
  LeaseRow lease_after = lease;
  int64_t from_lease = g->accepted_by_lease[m.lease_id] + 1;
  if (lease_after.state == LeaseState::kOpen && from_lease >= lease_after.samples) {
    lease_after.state = LeaseState::kDone;
  }
  // One atomic write: the rollout, the group's completion and the lease's state commit together
  // (in the next group commit; submit() answers once it is durable).
  auto shared_row = std::make_shared<const RolloutRow>(std::move(row));
  const bool lease_changed = lease_after.state != lease.state;
  const uint64_t ticket =
      ledger_->write([shared_row, completes, lease_changed, lease_after](Ledger& l) {
        l.insert_rollout(*shared_row);
        if (completes) l.set_group_status(shared_row->group_id, GroupStatus::kComplete);
        if (lease_changed) l.put_lease(lease_after);
      });
  ledger_->hold_rollout(shared_row, ticket);
  g->accepted++;
  g->accepted_by_lease[m.lease_id] = from_lease;
  book_.set_lease(lease_after, "", now());
  if (completes) {
    // Other leases on this group (a reissue raced a late result) can stop: heartbeat cancels.
    // The trainer gets the group once this write is durable (on_ledger_commit wakes it).
    book_.mark_complete(*g, ticket);
    ledger_->hold_completion(ticket);
  }
  auto& c = *counters_;
  c.accepted++;
  c.tokens_accepted += n;
  c.model_tokens_accepted += model_tokens;
  c.reward_sum += reward;
  c.staleness[std::min<uint64_t>(latest - std::min(latest, vmin), 9)]++;
  roster_.accepted(caller);
  book_.fairness().progressed(m.lease_id, row_accepted_ms);
  book_.fairness().proven(caller);
  verification_->audit(m, *g, ok.prompt_length);
  net::RolloutResponse r;
  r.status = net::IntakeStatus::kAccepted;
  r.reward = reward;
  return r;
}

// ---------------------------------------------------------------- TrainerPort

std::vector<AcceptedGroup> Hub::take_groups(size_t max_groups, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Complete, durable (its rows are visible to the ledger's reader), not taken, not held.
  auto takeable = [&](const std::string& id, const GroupState& g, uint64_t durable) {
    return g.row.status == GroupStatus::kComplete && g.complete_ticket <= durable &&
           !pending_.count(id) && !verification_->held_for_verdict(id);
  };
  // The complete groups waiting (queued_groups_locked prunes the list), oldest first.
  auto candidates = [&] {
    verification_->sweep(now());
    const uint64_t durable = ledger_->durable();
    std::vector<const std::string*> ids;
    for (const auto& id : book_.complete_groups())
      if (takeable(id, book_.groups().at(id), durable)) ids.push_back(&id);
    return ids;
  };
  groups_cv_.wait_for(lock, wait, [&] { return stopped_ || !candidates().empty(); });
  auto ids = candidates();
  std::sort(ids.begin(), ids.end(), [&](const std::string* a, const std::string* b) {
    return book_.groups().at(*a).order < book_.groups().at(*b).order;
  });
  std::vector<AcceptedGroup> out;
  for (const std::string* id : ids) {
    if (out.size() >= max_groups) break;
    const std::string& gid = *id;
    const auto& g = book_.groups().at(gid);
    AcceptedGroup ag;
    ag.group_id = gid;
    ag.prompt_id = g.row.prompt_id;
    for (const auto& row : ledger_->reader().rollouts_of_group(gid))
      ag.rollouts.push_back(accepted_from_row(row));
    // Defensive: the intake never accepts more than G, but the trainer relies on exactly G.
    if (ag.rollouts.size() > static_cast<size_t>(g.row.samples)) ag.rollouts.resize(g.row.samples);
    pending_.insert(gid);
    out.push_back(std::move(ag));
  }
  return out;
}

void Hub::hold_for_trainer(const std::vector<std::string>& held) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.clear();
  for (const auto& id : held) {
    auto it = book_.groups().find(id);
    if (it != book_.groups().end() && it->second.row.status == GroupStatus::kComplete)
      pending_.insert(id);
  }
  groups_cv_.notify_all();
}

void Hub::mark_trained(const std::vector<std::string>& group_ids_in, const StepReport& report) {
  std::unique_lock<std::mutex> lock(mutex_);
  // A repeat (a remote trainer retrying after an answer was lost) changes nothing: the groups
  // already trained at this step are left out, and a step left with none is not written again.
  std::vector<std::string> group_ids;
  for (const auto& id : group_ids_in) {
    auto it = book_.groups().find(id);
    const bool repeat = it != book_.groups().end() &&
                        it->second.row.status == GroupStatus::kTrained &&
                        it->second.row.trained_step == report.step;
    if (!repeat) group_ids.push_back(id);
  }
  if (group_ids.empty() && !group_ids_in.empty() && report.step <= last_step_) return;
  // The step's row in the ledger: the report as the trainer routes send it, with its groups.
  json rep = to_json(report);
  rep["group_ids"] = group_ids;
  for (const auto& id : group_ids) {
    STOA_CHECK(book_.groups().count(id), ErrorKind::kInvalidArgument,
               "mark_trained: unknown group '", id, "'");
  }
  // The groups and the step commit together: a crash never leaves a step without its groups.
  ledger_->write([group_ids, step = report.step, t = now(), text = rep.dump()](Ledger& l) {
    for (const auto& id : group_ids) l.set_group_status(id, GroupStatus::kTrained, step);
    l.put_step(step, t, text);
  });
  last_step_ = std::max(last_step_, report.step);
  for (const auto& id : group_ids) {
    book_.groups().at(id).row.status = GroupStatus::kTrained;
    book_.groups().at(id).row.trained_step = report.step;
    pending_.erase(id);
    counters_->groups_trained++;
  }
  counters_->last_step = report;
  // Reported by status, /metrics and the dashboard; the trainer's own watch logs the warning.
  counters_->learning_signal.add(report);
  record_step_history_locked(report);
  auto& buckets = counters_->step_seconds_buckets;
  size_t b = 0;
  while (b + 1 < buckets.size() && report.step_seconds > HubCounters::kStepBounds[b]) ++b;
  buckets[b]++;
  counters_->step_seconds_sum += report.step_seconds;
  const uint64_t ticket = ledger_->written();
  lock.unlock();
  ledger_->wait_durable(ticket);
}

void Hub::mark_dropped(const std::vector<std::string>& group_ids_in, const std::string& reason) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<std::string> group_ids;  // a repeat changes nothing (see mark_trained)
  for (const auto& id : group_ids_in) {
    auto it = book_.groups().find(id);
    if (it == book_.groups().end() || it->second.row.status != GroupStatus::kDropped)
      group_ids.push_back(id);
  }
  if (group_ids.empty()) return;
  for (const auto& id : group_ids) {
    STOA_CHECK(book_.groups().count(id), ErrorKind::kInvalidArgument,
               "mark_dropped: unknown group '", id, "'");
  }
  ledger_->write([group_ids, reason](Ledger& l) {
    for (const auto& id : group_ids) l.set_group_status(id, GroupStatus::kDropped, -1, reason);
  });
  for (const auto& id : group_ids) {
    book_.groups().at(id).row.status = GroupStatus::kDropped;
    book_.groups().at(id).row.drop_reason = reason;
    pending_.erase(id);
    counters_->dropped[reason]++;
  }
  const uint64_t ticket = ledger_->written();
  lock.unlock();
  ledger_->wait_durable(ticket);
}

int64_t Hub::last_step() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_step_;
}

void Hub::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
  }
  version_cv_.notify_all();
  groups_cv_.notify_all();
}

}  // namespace stoa::hub
