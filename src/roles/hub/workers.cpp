// The Hub's workers: joining (a fresh identity, or a resumed one proven by its secret), idle-worker
// expiry and the run's end. The tokens, sessions and rate limits themselves are the Identity's
// (identity/identity.h), the checks of a request's token HubAccess's (hub_access.h); the worker
// rows and their ledger writes are the Hub's.
#include "core/log.h"
#include "engine/arithmetic.h"
#include "net/secret.h"
#include "roles/hub/hub.h"
#include "roles/hub/observe/hub_counters.h"

namespace stoa::hub {

std::string Hub::issue_session_locked(const std::string& worker_id, const std::string& token_name,
                                      int64_t now_ms) {
  const Identity::IssuedSession issued = identity_.issue_session(worker_id, token_name, now_ms);
  roster_.session_issued(worker_id, now_ms);
  // Read and rewritten inside the group commit: the row there has every earlier queued write.
  ledger_->write(
      [worker_id, hash = issued.hash, token_name, expires = issued.expires_ms](Ledger& l) {
        if (auto row = l.worker(worker_id)) {
          row->session_token = hash;
          row->token_name = token_name;
          row->session_expires_ms = expires;
          l.put_worker(*row);
        }
      });
  return issued.token;
}

net::JoinResponse Hub::join(const std::string& bearer, const net::JoinRequest& request,
                            const std::string& peer) {
  std::unique_lock<std::mutex> lock(mutex_);
  const int64_t t = now();
  if (!peer.empty())
    identity_.throttle(Identity::Limit::kJoinPerAddress, peer, "join (this address)");
  identity_.refresh(ledger_->reader());
  const auto token_name = identity_.match(bearer, Identity::kWorkScope);
  if (!token_name) throw RequestError(401, "join: invalid or revoked join token");
  if (request.arithmetic != engine::kArithmetic)
    throw RequestError(409, engine::arithmetic_refusal("worker", request.arithmetic));
  ledger_->reserve();
  expire_workers_locked(t);
  WorkerRow row;
  bool resumed = false;
  if (!request.resume_id.empty()) {
    // A worker id is public (status, metrics): resuming one needs the secret handed to the
    // worker that first joined under it. An id the hub does not know gets a fresh identity.
    if (auto known = ledger_->reader().worker(request.resume_id)) {
      const bool proven =
          !known->secret_hash.empty() && !request.resume_secret.empty() &&
          net::constant_time_equal(net::sha256_hex(request.resume_secret), known->secret_hash);
      if (!proven) {
        counters_->resume_refused++;
        throw RequestError(403, cat("join: resuming worker '", request.resume_id.substr(0, 40),
                                    "' needs its worker secret (resume_secret), which does "
                                    "not match"));
      }
      row = *known;
      resumed = true;
      // The previous process of this worker is gone: its sessions end here.
      identity_.end_sessions_of(row.id);
    }
  }
  std::string secret;
  if (!resumed) {
    row = WorkerRow{};
    row.id = "w-" + net::random_token().substr(0, 12);
    row.joined_ms = t;
    secret = net::random_token();
    row.secret_hash = net::sha256_hex(secret);
  }
  row.name = request.name.empty() ? row.id : request.name;
  row.last_seen_ms = t;
  row.token_name = *token_name;
  const Identity::IssuedSession session = identity_.issue_session(row.id, row.token_name, t);
  row.session_token = session.hash;
  row.session_expires_ms = session.expires_ms;
  ledger_->write([row](Ledger& l) { l.put_worker(row); });
  roster_.joined(row, peer, t);
  book_.fairness().set_token(row.id, row.token_name);
  net::JoinResponse resp;
  resp.worker_id = row.id;
  resp.session_token = session.token;
  resp.worker_secret = secret;
  resp.session_ttl_s = config_.session_ttl_ms / 1000;
  resp.heartbeat_interval_s = config_.heartbeat_interval_s;
  resp.vocab_size = deps_.vocab_size;
  resp.max_tokens = config_.max_tokens;
  resp.topk = config_.topk;
  resp.task = deps_.task->name();
  resp.task_options = deps_.task_options.values();
  resp.stop_strings = deps_.task->stop_strings();
  resp.run_files = deps_.run_files;
  resp.arithmetic = engine::kArithmetic;
  const uint64_t ticket = ledger_->written();
  lock.unlock();
  ledger_->wait_durable(ticket);  // its identity survives a crash before the worker hears it
  log_info("hub", "worker ", row.id, " (", row.name, ") ", resumed ? "resumed" : "joined",
           " with token '", row.token_name, "'");
  return resp;
}

void Hub::expire_workers_locked(int64_t now_ms) {
  if (!roster_.scan_due(now_ms)) return;
  identity_.expire_sessions(now_ms);
  const std::vector<std::string> gone = roster_.idle(now_ms, config_.worker_idle_expiry_ms);
  if (gone.empty()) return;
  // A worker whose rollouts were accepted keeps its ledger row (the rollouts name it, and it
  // may still resume with its secret); one that never contributed leaves no trace.
  std::vector<std::string> forget;
  for (const auto& id : gone)
    if (roster_.find(id)->rollouts_accepted == 0) forget.push_back(id);
  ledger_->write([forget](Ledger& l) {
    for (const auto& id : forget) l.delete_worker(id);
  });
  for (const auto& id : gone) {
    log_info("hub", "worker ", id, " (", roster_.find(id)->name, ") expired: no heartbeat for ",
             config_.worker_idle_expiry_ms / 1000, " s");
    roster_.forget(id);
    book_.fairness().forget(id);
    identity_.forget_worker(id);
  }
  counters_->workers_expired += static_cast<int64_t>(gone.size());
}

void Hub::expire_workers() {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    roster_.rescan_now();
    expire_workers_locked(now());
    ticket = ledger_->written();
  }
  ledger_->wait_durable(ticket);
}

void Hub::end_run() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!roster_.end_run()) return;
  }
  log_info("hub", "the run is over: workers are told so at their next lease or heartbeat");
}

bool Hub::run_ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return roster_.run_ended();
}

size_t Hub::workers_not_told_of_end(int64_t recent_ms) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return roster_.not_told_of_end(now(), recent_ms);
}

}  // namespace stoa::hub
