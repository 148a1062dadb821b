#include "roles/hub/hub.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/log.h"
#include "roles/hub/observe/hub_counters.h"
#include "roles/hub/verification/verification.h"
#include "roles/hub/verification/verification_mode.h"

namespace stoa::hub {

uint64_t AcceptedGroup::min_version() const {
  uint64_t m = UINT64_MAX;
  for (const auto& r : rollouts) m = std::min(m, r.min_version);
  return rollouts.empty() ? 0 : m;
}

namespace {
int64_t system_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

HubState::HubState(HubConfig config, HubDeps deps)
    : config_(std::move(config)),
      deps_(std::move(deps)),
      identity_(config_),
      book_(config_.lease_caps),
      versions_(deps_.store, config_.max_staleness),
      prompts_(deps_.prompts.size(), config_.seed,
               [this](int64_t prompt_index) {
                 return render_training_prompt(*deps_.task,
                                               deps_.prompts.at(static_cast<size_t>(prompt_index)),
                                               *deps_.codec, config_.sampling);
               }),
      counters_(std::make_unique<HubCounters>()) {}

HubState::~HubState() = default;

Hub::Hub(HubConfig config, HubDeps deps) : HubState(std::move(config), std::move(deps)) {
  STOA_CHECK(deps_.task && deps_.codec && deps_.store, ErrorKind::kInvalidArgument,
             "hub: task, codec and blob store are required");
  STOA_CHECK(!config_.join_token.empty(), ErrorKind::kInvalidArgument,
             "hub: a join token is required");
  STOA_CHECK(!deps_.prompts.empty(), ErrorKind::kInvalidArgument, "hub: no training prompts");
  STOA_CHECK(config_.group_size > 0 && deps_.vocab_size > 0, ErrorKind::kInvalidArgument,
             "hub: group_size and vocab_size must be positive");
  STOA_CHECK(config_.hoard_min_tokens_per_s >= 0 && config_.hoard_grace_ms >= 0,
             ErrorKind::kInvalidArgument,
             "hub: hoard_grace_ms and hoard_min_tokens_per_s must be >= 0");
  if (!deps_.clock_ms) deps_.clock_ms = system_ms;
  counters_->start_ms = now();
  counters_->learning_signal = LearningSignalWatch(config_.no_signal_warn_steps);
  ledger_ = std::make_unique<RunLedger>(config_.ledger_path, config_.max_pending_writes);
  identity_.install(ledger_->reader(), now());
  verification_ = std::make_unique<Verification>(
      VerificationParts{config_, deps_, *ledger_, book_, pending_, *counters_, roster_.stats()});
  restore();
  ledger_->start([this] { on_ledger_commit(); });
  // What the run's verification protects, as /v1/status says it (verification_mode.h).
  const VerificationMode mode =
      verification_mode(config_.verify, config_.verify.enabled, config_.beyond_loopback);
  log_info("hub", "verification: ", mode.name, ": ", mode.guarantee);
  if (!mode.warning.empty()) log_warn("hub", "verification: ", mode.warning);
}

Hub::~Hub() {
  stop();
  ledger_->stop();  // commits what is still queued (every caller waited for its own writes)
}

// ---------------------------------------------------------------- the ledger's group commit
void Hub::on_ledger_commit() {
  bool completed = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed = ledger_->forget_durable();
  }
  // A complete group is handed to the trainer only once durable (take_groups).
  if (completed) groups_cv_.notify_all();
}

void Hub::restore() {
  for (const auto& w : ledger_->reader().workers()) {
    roster_.restore(w, config_.session_ttl_ms);
    book_.fairness().set_token(w.id, w.token_name);
    // The ledger keeps each worker's newest session (hashed); older rotated ones lapse.
    if (!w.session_token.empty()) {
      identity_.restore_session(w.session_token, w.id, w.token_name, w.session_expires_ms);
    }
  }
  for (const auto& g : ledger_->reader().groups()) book_.add_group(g);
  for (const auto& l : ledger_->reader().leases(false)) book_.set_lease(l, "", now());
  // Per-lease counts come from the rollouts themselves (the source of truth).
  for (const auto& [gid, n] : ledger_->reader().rollout_counts()) {
    auto it = book_.groups().find(gid);
    if (it == book_.groups().end()) continue;
    it->second.accepted = n;
    for (const auto& r : ledger_->reader().rollouts_of_group(gid)) {
      it->second.accepted_by_lease[r.lease_id]++;
      roster_.accepted(r.worker_id);
    }
  }
  for (const auto& [id, w] : roster_.stats())
    if (w.rollouts_accepted > 0) book_.fairness().proven(id);
  counters_->accepted = ledger_->reader().rollout_count();
  last_step_ = ledger_->reader().last_step();
  if (auto m = ledger_->reader().meta("next_prompt")) prompts_.restore_cursor(std::stoll(*m));
  for (const auto& [id, g] : book_.groups()) {
    if (g.row.status == GroupStatus::kTrained) counters_->groups_trained++;
    if (g.row.status == GroupStatus::kDropped) counters_->dropped[g.row.drop_reason]++;
  }
  versions_.restore(ledger_->reader().versions());
}

// ---------------------------------------------------------------- versions
net::VersionInfo Hub::version_info(std::optional<uint64_t> after) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return versions_.info(after);
}

net::VersionInfo Hub::wait_version(std::optional<uint64_t> after,
                                   std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto newer = [&] {
    if (stopped_) return true;
    if (!after) return true;
    auto info = versions_.info(after);
    return info.version && *info.version > *after;
  };
  version_cv_.wait_for(lock, timeout, newer);
  return versions_.info(after);
}

std::optional<uint64_t> Hub::latest_version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return versions_.latest();
}

void Hub::set_version_listener(std::function<void()> listener) {
  std::lock_guard<std::mutex> lock(mutex_);
  version_listener_ = std::move(listener);
}

void Hub::publish_version(const pulse::Published& published, const Hash128& state_hash) {
  std::unique_lock<std::mutex> lock(mutex_);
  const VersionRow row = version_row(published, state_hash, now());
  ledger_->write([row](Ledger& l) { l.put_version(row); });
  versions_.add(row);
  VersionPoint point;
  point.version = published.version;
  point.t_s = static_cast<double>(row.published_ms - counters_->start_ms) / 1000.0;
  if (published.patch) point.patch_bytes = published.patch->bytes;
  if (published.anchor) point.anchor_bytes = published.anchor->bytes;
  history_.add_version(point);
  auto listener = version_listener_;
  const uint64_t ticket = ledger_->written();
  lock.unlock();
  // Workers hear of the version once it is durable (rollouts built on it commit after it anyway).
  ledger_->wait_durable(ticket);
  version_cv_.notify_all();
  if (listener) listener();
}

// ---------------------------------------------------------------- leases
void Hub::expire_locked(int64_t now_ms) {
  verification_->sweep(now_ms);  // peer checks past their deadlines go to the trusted replay
  // Hoarded: no rollout accepted on it within the deadline, though heartbeats kept it alive.
  for (const auto& id : book_.fairness().overdue(now_ms, hoard_deadline_ms())) {
    revoke_locked(id, "hoarded: no rollout accepted within the deadline", now_ms);
    counters_->leases_revoked++;
  }
  for (const LeaseRow& l : book_.expire(now_ms)) {
    ledger_->write([l](Ledger& ledger) { ledger.put_lease(l); });
    counters_->leases_expired++;
    log_info("hub", "lease ", l.id, " of worker ", l.worker_id, " expired; its group ", l.group_id,
             " will be reissued");
  }
}

void Hub::expire_leases() {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    expire_locked(now());
    ticket = ledger_->written();
  }
  ledger_->wait_durable(ticket);
}

net::Lease Hub::make_lease_locked(GroupState& g, const std::string& worker_id,
                                  const std::string& peer, int32_t samples, int64_t now_ms) {
  prompts_.rendered(g.row.prompt_index);  // before any write (a restored group's)
  LeaseRow l;
  l.id = "l-" + net::random_token().substr(0, 16);
  l.group_id = g.row.id;
  l.worker_id = worker_id;
  l.samples = samples;
  l.issued_ms = now_ms;
  l.deadline_ms = now_ms + config_.lease_ttl_ms;
  l.max_deadline_ms = now_ms + std::max(config_.lease_max_ms, config_.lease_ttl_ms);
  l.issued_at_version = versions_.latest().value_or(0);
  ledger_->write([l](Ledger& ledger) { ledger.put_lease(l); });
  book_.set_lease(l, peer, now());
  book_.fairness().served(worker_id);
  counters_->leases_issued++;
  const auto& problem = deps_.prompts.at(static_cast<size_t>(g.row.prompt_index));
  net::Lease out;
  out.lease_id = l.id;
  out.group_id = g.row.id;
  out.prompt_id = g.row.prompt_id;
  out.question = problem.question;
  out.prompt_tokens = prompts_.rendered(g.row.prompt_index);  // rendered: see above
  out.samples = samples;
  out.sampling = config_.sampling;
  out.deadline_unix_ms = l.deadline_ms;
  out.issued_at_version = l.issued_at_version;
  out.seeds = verification_->lease_seeds(l.id, samples);
  return out;
}

// How long a worker refused a group keeps its claim on the next one: it asks again after
// no_work_retry_ms (a worker waits at least that; a few of them cover a slow round trip).
int64_t Hub::claim_ttl_ms() const {
  return std::max<int64_t>(2000, 4 * config_.no_work_retry_ms);
}

std::optional<net::Lease> Hub::lease_locked(const std::string& worker_id, const std::string& peer,
                                            int64_t now_ms) {
  expire_locked(now_ms);
  // Caps first (lease_fairness.h): over one, "no work now" — the worker asks again later, as
  // when no group is open.
  if (book_.fairness().over_cap(worker_id, peer)) {
    counters_->leases_capped++;
    book_.fairness().served(worker_id);  // it cannot take a group: no claim on one either
    return std::nullopt;
  }
  std::map<std::string, int64_t> outstanding_by_group = book_.outstanding_by_group();
  const std::vector<std::string>& open_group_ids = book_.open_groups();
  auto needed_of = [&](const GroupState& g) { return book_.needed(g, outstanding_by_group); };
  const size_t open_groups = open_group_ids.size();
  size_t reissuable = 0;
  for (const auto& gid : open_group_ids)
    reissuable += needed_of(book_.groups().at(gid)) > 0 ? 1 : 0;
  const bool trainer_keeps_up = book_.queued_groups() < config_.max_queued_groups;
  const size_t creatable = open_groups < config_.max_open_groups && trainer_keeps_up
                               ? config_.max_open_groups - open_groups
                               : 0;
  // The waiting order: the free groups go to better-ranked workers that asked and wait first.
  // If they are exactly taken, the next worker in line takes a hoarder's lease over (the group
  // is reissued below) instead of waiting for its revocation. Failing that, a worker with empty
  // hands gets a group opened beyond max_open_groups (hub_config.h waiting_worker_groups): the
  // groups may all be held by identities that never submit, and are until the hoarding deadline.
  const size_t ahead = book_.fairness().ahead_of(worker_id, now_ms);
  bool beyond = false;
  if (ahead >= reissuable + creatable) {
    const bool hoarder = book_.fairness().standing(worker_id) == Standing::kHoarder;
    std::optional<std::string> victim;
    if (ahead == reissuable + creatable && !hoarder)
      victim = book_.fairness().preemptable(worker_id);
    // Room beyond once every claim ahead of it is served (those past the free groups with a
    // group beyond each): open + (ahead - reissuable) < max_open_groups + waiting_worker_groups.
    beyond =
        !victim && !hoarder && trainer_keeps_up && book_.fairness().held(worker_id) == 0 &&
        open_groups + ahead < reissuable + config_.max_open_groups + config_.waiting_worker_groups;
    if (!victim && !beyond) {
      if (ahead > 0) counters_->leases_deferred++;
      book_.fairness().waiting(worker_id, peer, now_ms, claim_ttl_ms());
      return std::nullopt;
    }
    if (victim) {
      const LeaseRow& taken = book_.leases().at(*victim);
      const auto& by_lease = book_.groups().at(taken.group_id).accepted_by_lease;
      const auto got = by_lease.find(taken.id);
      outstanding_by_group[taken.group_id] -=
          std::max<int64_t>(0, taken.samples - (got == by_lease.end() ? 0 : got->second));
      revoke_locked(*victim, "preempted: held by a worker whose lease was revoked", now_ms);
      counters_->leases_preempted++;
    }
  }
  // 1. A group whose samples are not all accounted for (an expired/released/revoked lease, or
  //    rollouts rejected): reissue what is missing, oldest group first.
  for (const auto& gid : open_group_ids) {
    auto& g = book_.groups().at(gid);
    const int64_t needed = needed_of(g);
    if (needed > 0)
      return make_lease_locked(g, worker_id, peer, static_cast<int32_t>(needed), now_ms);
  }
  // 2. A new group, unless enough are out or the trainer is behind (back-pressure: rollouts
  //    sampled now would only go stale in the queue).
  if (creatable == 0 && !beyond) {
    book_.fairness().waiting(worker_id, peer, now_ms, claim_ttl_ms());
    return std::nullopt;
  }
  // A prompt that leaves no room in the transcript (max_tokens) cannot be sampled by any worker:
  // skip it rather than hand it out (found with a byte-level codec, whose prompts are long).
  const std::optional<int64_t> index =
      prompts_.next_fitting(config_.max_tokens, [&](int64_t candidate, int64_t len) {
        if (counters_->prompts_too_long.insert(candidate).second)
          log_warn("hub", "prompt '", deps_.prompts[static_cast<size_t>(candidate)].id,
                   "' renders to ", len, " tokens, not under max_tokens = ", config_.max_tokens,
                   ": skipped");
      });
  if (!index) {
    if (counters_->prompts_too_long.size() == prompts_.size() && !counters_->all_too_long) {
      counters_->all_too_long = true;
      log_error("hub", "every training prompt is at least max_tokens = ", config_.max_tokens,
                " tokens long: no work can be leased (raise [hub] max_tokens)");
    }
    return std::nullopt;
  }
  GroupRow row;
  row.id = "g-" + std::to_string(prompts_.cursor()) + "-" + net::random_token().substr(0, 8);
  row.prompt_id = deps_.prompts[static_cast<size_t>(*index)].id;
  row.prompt_index = *index;
  row.samples = config_.group_size;
  row.created_ms = now_ms;
  ledger_->write([row, cursor = std::to_string(prompts_.cursor() + 1)](Ledger& l) {
    l.put_group(row);
    l.set_meta("next_prompt", cursor);
  });
  prompts_.advance();
  book_.add_group(row);
  if (open_groups >= config_.max_open_groups) counters_->groups_opened_for_waiting++;
  return make_lease_locked(book_.groups().at(row.id), worker_id, peer, row.samples, now_ms);
}

net::LeaseResponse Hub::lease(const std::string& worker_id, const std::string& peer) {
  net::LeaseResponse resp;
  uint64_t ticket = 0;
  bool throttled = false;
  // A prompt not rendered yet is rendered outside the lock, then the lease is tried again (the
  // state may have moved meanwhile). Each pass renders one more prompt; a few cover a run of
  // prompts too long for max_tokens.
  for (int pass = 0;; ++pass) {
    std::optional<int64_t> to_render;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const int64_t t = now();
      if (!throttled) {  // one request, counted once
        identity_.throttle(Identity::Limit::kLeasePerWorker, worker_id, "lease (this worker)");
        if (!peer.empty())
          identity_.throttle(Identity::Limit::kLeasePerAddress, peer, "lease (this address)");
        throttled = true;
        verification_->note_address(worker_id, peer);
      }
      if (roster_.run_ended()) {
        roster_.told_run_ended(worker_id);
        resp.run_ended = true;
        return resp;
      }
      if (stopped_) {
        resp.retry_after_ms = config_.no_work_retry_ms;
        return resp;
      }
      ledger_->reserve();
      try {
        resp.lease = lease_locked(worker_id, peer, t);
      } catch (const PromptDeck::NotRendered& missing) {
        to_render = missing.prompt_index;
      }
      if (!to_render || pass >= 8) {
        if (!resp.lease) resp.retry_after_ms = config_.no_work_retry_ms;
        ticket = ledger_->written();
      }
    }
    if (!to_render || pass >= 8) break;
    std::vector<int32_t> tokens = prompts_.render(*to_render);
    std::lock_guard<std::mutex> lock(mutex_);
    prompts_.keep(*to_render, std::move(tokens));
  }
  ledger_->wait_durable(ticket);  // a lease the hub could forget in a crash is never handed out
  return resp;
}

void Hub::release(const std::string& worker_id, const std::string& lease_id) {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = book_.leases().find(lease_id);
    if (it == book_.leases().end())
      throw RequestError(404, cat("release: unknown lease '", lease_id, "'"));
    if (it->second.worker_id != worker_id) {
      throw RequestError(409, cat("release: lease '", lease_id, "' is not yours"));
    }
    ledger_->reserve();
    if (it->second.state == LeaseState::kOpen) {
      LeaseRow released = it->second;
      released.state = LeaseState::kReleased;
      book_.set_lease(released, "", now());
      ledger_->write([released](Ledger& ledger) { ledger.put_lease(released); });
      counters_->leases_released++;
    }
    ticket = ledger_->written();
  }
  ledger_->wait_durable(ticket);
}

net::HeartbeatResponse Hub::heartbeat(const std::string& caller, const net::Heartbeat& hb) {
  if (hb.worker_id != caller) {
    throw RequestError(403, cat("heartbeat: worker_id '", hb.worker_id,
                                "' does not match the session token's worker"));
  }
  net::HeartbeatResponse resp;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ledger_->reserve();
    heartbeat_locked(caller, hb, resp);
    ticket = ledger_->written();
  }
  ledger_->wait_durable(ticket);
  return resp;
}

void Hub::heartbeat_locked(const std::string& caller, const net::Heartbeat& hb,
                           net::HeartbeatResponse& resp) {
  int64_t t = now();
  expire_locked(t);
  expire_workers_locked(t);
  WorkerStats* w = roster_.heard(hb, t);
  // Expired between authenticate() and here: its sessions are gone, so it joins again.
  if (!w) throw RequestError(401, "heartbeat: the worker expired (join again)");
  ledger_->write([caller, t](Ledger& l) { l.touch_worker(caller, t); });
  resp.latest_version = versions_.latest();
  if (roster_.run_ended()) {
    resp.run_ended = true;
    roster_.told_run_ended(caller);
  }
  // Rotation: past half its life the session gets a successor; the worker switches to it and
  // the old token lapses at its own expiry (calls in flight with it still succeed).
  if (t - w->session_issued_ms >= config_.session_ttl_ms / 2) {
    resp.session_token = issue_session_locked(caller, identity_.token_name_of(caller), t);
  }
  book_.fairness().heartbeat(caller, hb.leases);
  for (const auto& lid : hb.leases) {
    auto it = book_.leases().find(lid);
    if (it == book_.leases().end() || it->second.worker_id != caller) continue;
    auto& l = it->second;
    auto g = book_.groups().find(l.group_id);
    bool closed = g == book_.groups().end() || g->second.row.status != GroupStatus::kOpen;
    if (closed || l.state == LeaseState::kReleased || l.state == LeaseState::kDone ||
        l.state == LeaseState::kRevoked) {
      resp.cancelled.push_back(lid);
    } else if (l.state == LeaseState::kOpen) {
      l.deadline_ms = std::min(t + config_.lease_ttl_ms, l.max_deadline_ms);
      ledger_->write([l](Ledger& ledger) { ledger.put_lease(l); });
      resp.renewed.push_back(lid);
    }
    // An expired lease is neither: its late results may still count (docs/protocol.md).
  }
}

}  // namespace stoa::hub
