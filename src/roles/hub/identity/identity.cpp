#include "roles/hub/identity/identity.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/log.h"
#include "net/secret.h"
#include "roles/hub/request_error.h"

namespace stoa::hub {

namespace {
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

Identity::Identity(const HubConfig& config)
    : config_(config),
      join_per_ip_(config.limits.join_per_ip),
      lease_per_worker_(config.limits.lease_per_worker),
      lease_per_ip_(config.limits.lease_per_ip),
      rollouts_per_worker_(config.limits.rollouts_per_worker),
      rollouts_per_ip_(config.limits.rollouts_per_ip) {}

void Identity::install(Ledger& ledger, int64_t now_ms) {
  upsert_configured(ledger, "default", config_.join_token, kWorkScope, now_ms);
  operator_token_file_ =
      install_scope_token(ledger, "operator", kOperatorScope, config_.operator_token, now_ms);
  // Only a hub whose trainer dials in (`stoa hub`) has a use for a trainer token.
  if (config_.serve_trainer)
    trainer_token_file_ =
        install_scope_token(ledger, "trainer", kTrainScope, config_.trainer_token, now_ms);
  tokens_ = ledger.join_tokens();
  tokens_data_version_ = ledger.data_version();
  tokens_checked_ = std::chrono::steady_clock::now();
}

std::string Identity::install_scope_token(Ledger& ledger, const std::string& name,
                                          const char* scope, const std::string& configured,
                                          int64_t now_ms) {
  if (!configured.empty()) {
    upsert_configured(ledger, name, configured, scope, now_ms);
    return "";
  }
  for (const auto& row : ledger.join_tokens())
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
  ledger.put_join_token({name, net::sha256_hex(token), scope, now_ms, 0});
  log_info("hub", name, " token written to ", file);
  return file.string();
}

void Identity::refresh(Ledger& ledger) {
  const auto t = std::chrono::steady_clock::now();
  if (t - tokens_checked_ < kTokenRefresh) return;
  tokens_checked_ = t;
  // Moves when another connection commits: `stoa hub token`, and also the hub's own group commit
  // (its own connection), so tokens are re-read at most every kTokenRefresh.
  const int64_t version = ledger.data_version();
  if (version == tokens_data_version_) return;
  tokens_data_version_ = version;
  tokens_ = ledger.join_tokens();
}

std::optional<std::string> Identity::match(const std::string& bearer,
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

Identity::IssuedSession Identity::issue_session(const std::string& worker_id,
                                                const std::string& token_name, int64_t now_ms) {
  IssuedSession issued;
  issued.token = net::random_token();
  issued.hash = net::sha256_hex(issued.token);
  issued.expires_ms = now_ms + config_.session_ttl_ms;
  sessions_[issued.hash] = Session{worker_id, token_name, issued.expires_ms};
  return issued;
}

void Identity::restore_session(const std::string& hash, const std::string& worker_id,
                               const std::string& token_name, int64_t expires_ms) {
  sessions_[hash] = Session{worker_id, token_name, expires_ms};
}

std::string Identity::authenticate(const std::string& bearer, int64_t now_ms) {
  if (bearer.empty()) throw RequestError(401, "missing session token (join first)");
  const std::string hash = net::sha256_hex(bearer);
  // Looked up by digest: the map's early-exit comparisons see SHA-256 values, not the secret.
  auto it = sessions_.find(hash);
  if (it == sessions_.end() || !net::constant_time_equal(it->first, hash)) {
    throw RequestError(401, "unknown session token (join first)");
  }
  const Session& s = it->second;
  if (s.expires_ms <= now_ms) {
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
  return s.worker_id;
}

std::string Identity::token_name_of(const std::string& worker_id) const {
  std::string name;
  for (const auto& [hash, s] : sessions_)
    if (s.worker_id == worker_id) name = s.token_name;
  return name;
}

void Identity::end_sessions_of(const std::string& worker_id) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    it = it->second.worker_id == worker_id ? sessions_.erase(it) : std::next(it);
  }
}

void Identity::expire_sessions(int64_t now_ms) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    it = it->second.expires_ms <= now_ms ? sessions_.erase(it) : std::next(it);
  }
}

RateLimiter& Identity::limiter(Limit limit) {
  switch (limit) {
    case Limit::kJoinPerAddress:
      return join_per_ip_;
    case Limit::kLeasePerWorker:
      return lease_per_worker_;
    case Limit::kLeasePerAddress:
      return lease_per_ip_;
    case Limit::kRolloutsPerWorker:
      return rollouts_per_worker_;
    case Limit::kRolloutsPerAddress:
      return rollouts_per_ip_;
  }
  return join_per_ip_;  // unreachable: every Limit is listed
}

void Identity::throttle(Limit limit, const std::string& key, const char* what) {
  // Rates are about real time: the steady clock, not the hub's (injectable) wall clock.
  const int64_t steady_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count();
  const int64_t wait_ms = limiter(limit).acquire(key, steady_ms);
  if (wait_ms == 0) return;
  rate_limited_[what]++;
  throw RequestError(429, cat(what, ": rate limit exceeded, retry in ", wait_ms, " ms"), wait_ms);
}

void Identity::forget_worker(const std::string& worker_id) {
  lease_per_worker_.forget(worker_id);
  rollouts_per_worker_.forget(worker_id);
  end_sessions_of(worker_id);
}

}  // namespace stoa::hub
