// Who may talk to the Hub: named join tokens (the ledger's join_tokens table, `stoa hub token`),
// worker identities that can only be resumed with their secret, session tokens that expire and
// rotate, the operator token for the observability routes, idle-worker expiry and the rate
// limits. Every secret is compared in constant time, and the hub keeps only SHA-256 digests.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/log.h"
#include "net/secret.h"
#include "roles/hub/hub.h"
#include "roles/hub/observe/hub_counters.h"
#include "roles/hub/verification/verification_state.h"

namespace stoa::hub {

namespace {
constexpr const char* kWorkScope = "work";
constexpr const char* kOperatorScope = "operator";
constexpr const char* kTrainScope = "train";
// How often a live hub looks for tokens revoked by `stoa hub token revoke` (another process).
constexpr auto kTokenRefresh = std::chrono::milliseconds(500);

// The configured token under `name`: inserted (or replaced when the configured value changed),
// but a token the operator revoked stays revoked while the configuration still names it.
void upsert_configured(Ledger& ledger, const std::string& name, const std::string& token,
                       const char* scope, int64_t now_ms) {
  const std::string hash = net::sha256_hex(token);
  for (const auto& row : ledger.join_tokens()) {
    if (row.name == name && row.scope == scope && net::constant_time_equal(row.token_hash, hash))
      return;
  }
  ledger.put_join_token({name, hash, scope, now_ms, 0});
}
}  // namespace

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

void Hub::install_tokens() {
  const int64_t t = now();
  upsert_configured(*ledger_, "default", config_.join_token, kWorkScope, t);
  operator_token_file_ = install_scope_token("operator", kOperatorScope, config_.operator_token, t);
  // Only a hub whose trainer dials in (`stoa hub`) has a use for a trainer token.
  if (config_.serve_trainer)
    trainer_token_file_ = install_scope_token("trainer", kTrainScope, config_.trainer_token, t);
  tokens_ = ledger_->join_tokens();
  tokens_data_version_ = ledger_->data_version();
  tokens_checked_ = std::chrono::steady_clock::now();
}

std::string Hub::install_scope_token(const std::string& name, const char* scope,
                                     const std::string& configured, int64_t now_ms) {
  if (!configured.empty()) {
    upsert_configured(*ledger_, name, configured, scope, now_ms);
    return "";
  }
  for (const auto& row : ledger_->join_tokens())
    if (row.scope == scope && row.revoked_ms == 0) return "";
  // First start without a configured token: make one, keep its digest in the ledger and the
  // token itself in a file only the owner can read.
  const std::string token = net::random_token();
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(config_.ledger_path).parent_path();
  const fs::path file = (dir.empty() ? fs::path(name + "_token") : dir / (name + "_token"));
  {
    std::ofstream out(file, std::ios::trunc);
    out << token << "\n";
    STOA_CHECK(out.good(), ErrorKind::kIo, "hub: cannot write ", file);
  }
  ::chmod(file.c_str(), 0600);
  ledger_->put_join_token({name, net::sha256_hex(token), scope, now_ms, 0});
  log_info("hub", name, " token written to ", file);
  return file.string();
}

void Hub::check_trainer(const std::string& bearer) {
  if (bearer.empty())
    throw RequestError(401, "trainer: missing Authorization: Bearer <trainer token>");
  std::lock_guard<std::mutex> lock(mutex_);
  refresh_tokens_locked();
  if (!match_token_locked(bearer, kTrainScope))
    throw RequestError(403, "trainer: the token is not a valid token of scope train");
}

void Hub::refresh_tokens_locked() {
  const auto t = std::chrono::steady_clock::now();
  if (t - tokens_checked_ < kTokenRefresh) return;
  tokens_checked_ = t;
  // Moves when another connection commits: `stoa hub token`, and also the hub's own group commit
  // (its own connection), so tokens are re-read at most every kTokenRefresh.
  const int64_t version = ledger_->data_version();
  if (version == tokens_data_version_) return;
  tokens_data_version_ = version;
  tokens_ = ledger_->join_tokens();
}

std::optional<std::string> Hub::match_token_locked(const std::string& bearer,
                                                   const std::string& scope) const {
  if (bearer.empty()) return std::nullopt;
  const std::string hash = net::sha256_hex(bearer);
  std::optional<std::string> found;
  // Every row is compared (no early exit): the time does not depend on which token matched.
  for (const auto& row : tokens_) {
    const bool equal = net::constant_time_equal(row.token_hash, hash);
    if (equal && row.scope == scope && row.revoked_ms == 0) found = row.name;
  }
  return found;
}

std::string Hub::issue_session_locked(const std::string& worker_id, const std::string& token_name,
                                      int64_t now_ms) {
  const std::string token = net::random_token();
  const std::string hash = net::sha256_hex(token);
  const int64_t expires = now_ms + config_.session_ttl_ms;
  sessions_[hash] = Session{worker_id, token_name, expires};
  auto& w = workers_[worker_id];
  w.session_issued_ms = now_ms;
  // Read and rewritten inside the group commit: the row there has every earlier queued write.
  write_locked([worker_id, hash, token_name, expires](Ledger& l) {
    if (auto row = l.worker(worker_id)) {
      row->session_token = hash;
      row->token_name = token_name;
      row->session_expires_ms = expires;
      l.put_worker(*row);
    }
  });
  return token;
}

void Hub::throttle_locked(RateLimiter& limiter, const std::string& key, const char* what) {
  // Rates are about real time: the steady clock, not the hub's (injectable) wall clock.
  const int64_t steady_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count();
  const int64_t wait_ms = limiter.acquire(key, steady_ms);
  if (wait_ms == 0) return;
  counters_->rate_limited[what]++;
  throw RequestError(429, cat(what, ": rate limit exceeded, retry in ", wait_ms, " ms"), wait_ms);
}

net::JoinResponse Hub::join(const std::string& bearer, const net::JoinRequest& request,
                            const std::string& peer) {
  std::unique_lock<std::mutex> lock(mutex_);
  const int64_t t = now();
  if (!peer.empty()) throttle_locked(join_per_ip_, peer, "join (this address)");
  refresh_tokens_locked();
  const auto token_name = match_token_locked(bearer, kWorkScope);
  if (!token_name) throw RequestError(401, "join: invalid or revoked join token");
  reserve_writes_locked();
  expire_workers_locked(t);
  WorkerRow row;
  bool resumed = false;
  if (!request.resume_id.empty()) {
    // A worker id is public (status, metrics): resuming one needs the secret handed to the
    // worker that first joined under it. An id the hub does not know gets a fresh identity.
    if (auto known = ledger_->worker(request.resume_id)) {
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
      for (auto it = sessions_.begin(); it != sessions_.end();) {
        it = it->second.worker_id == row.id ? sessions_.erase(it) : std::next(it);
      }
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
  const std::string session = net::random_token();
  row.session_token = net::sha256_hex(session);
  row.session_expires_ms = t + config_.session_ttl_ms;
  write_locked([row](Ledger& l) { l.put_worker(row); });
  sessions_[row.session_token] = Session{row.id, row.token_name, row.session_expires_ms};
  auto& w = workers_[row.id];
  w.id = row.id;
  w.name = row.name;
  w.token_name = row.token_name;
  if (!peer.empty()) w.address = peer;
  fairness_.set_token(row.id, row.token_name);
  w.last_seen_ms = t;
  w.session_issued_ms = t;
  net::JoinResponse resp;
  resp.worker_id = row.id;
  resp.session_token = session;
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
  const uint64_t ticket = written_locked();
  lock.unlock();
  wait_durable(ticket);  // its identity survives a crash before the worker hears it
  log_info("hub", "worker ", row.id, " (", row.name, ") ", resumed ? "resumed" : "joined",
           " with token '", row.token_name, "'");
  return resp;
}

std::string Hub::authenticate(const std::string& bearer) {
  if (bearer.empty()) throw RequestError(401, "missing session token (join first)");
  const std::string hash = net::sha256_hex(bearer);
  std::lock_guard<std::mutex> lock(mutex_);
  refresh_tokens_locked();
  // Looked up by digest: the map's early-exit comparisons see SHA-256 values, not the secret.
  auto it = sessions_.find(hash);
  if (it == sessions_.end() || !net::constant_time_equal(it->first, hash)) {
    throw RequestError(401, "unknown session token (join first)");
  }
  const Session& s = it->second;
  if (s.expires_ms <= now()) {
    sessions_.erase(it);
    throw RequestError(401, "session token expired (join again)");
  }
  if (!s.token_name.empty()) {
    for (const auto& row : tokens_) {
      if (row.name == s.token_name && row.revoked_ms != 0) {
        throw RequestError(401, cat("the join token '", row.name, "' of this session was revoked"));
      }
    }
  }
  if (verification_ && verification_->quarantined.count(s.worker_id))
    throw RequestError(403, "worker " + s.worker_id + " is quarantined (a rollout failed replay)");
  return s.worker_id;
}

void Hub::check_operator(const std::string& bearer, bool loopback) {
  if (loopback) return;
  std::lock_guard<std::mutex> lock(mutex_);
  refresh_tokens_locked();
  if (!match_token_locked(bearer, kOperatorScope)) {
    throw RequestError(401,
                       "operator token required (Authorization: Bearer <token>, or "
                       "?token= on the dashboard)");
  }
}

void Hub::expire_workers_locked(int64_t now_ms) {
  if (now_ms - workers_scanned_ms_ < 1000) return;  // a scan per second is plenty
  workers_scanned_ms_ = now_ms;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    it = it->second.expires_ms <= now_ms ? sessions_.erase(it) : std::next(it);
  }
  std::vector<std::string> gone;
  for (const auto& [id, w] : workers_) {
    if (now_ms - w.last_seen_ms > config_.worker_idle_expiry_ms) gone.push_back(id);
  }
  if (gone.empty()) return;
  // A worker whose rollouts were accepted keeps its ledger row (the rollouts name it, and it
  // may still resume with its secret); one that never contributed leaves no trace.
  std::vector<std::string> forget;
  for (const auto& id : gone)
    if (workers_[id].rollouts_accepted == 0) forget.push_back(id);
  write_locked([forget](Ledger& l) {
    for (const auto& id : forget) l.delete_worker(id);
  });
  for (const auto& id : gone) {
    log_info("hub", "worker ", id, " (", workers_[id].name, ") expired: no heartbeat for ",
             config_.worker_idle_expiry_ms / 1000, " s");
    workers_.erase(id);
    fairness_.forget(id);
    lease_per_worker_.forget(id);
    rollouts_per_worker_.forget(id);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      it = it->second.worker_id == id ? sessions_.erase(it) : std::next(it);
    }
  }
  counters_->workers_expired += static_cast<int64_t>(gone.size());
}

void Hub::expire_workers() {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    workers_scanned_ms_ = 0;
    expire_workers_locked(now());
    ticket = written_locked();
  }
  wait_durable(ticket);
}

}  // namespace stoa::hub
