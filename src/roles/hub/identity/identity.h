// Who may talk to the hub (docs/protocol.md "Auth"): the named tokens (the ledger's join_tokens
// table, `stoa hub token`) with their scopes, the session tokens a join or a rotation issues and
// their expiry, and the rate limits per worker and per address. Every secret is compared in
// constant time, and only SHA-256 digests are kept. Not thread-safe: the Hub calls it under its
// lock. It writes the ledger only at install() (before the hub's group commit starts); the
// sessions it issues are written by the Hub, which owns the worker rows.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "roles/hub/hub_config.h"
#include "roles/hub/identity/rate_limit.h"
#include "roles/hub/ledger/ledger.h"

namespace stoa::hub {

class Identity {
 public:
  static constexpr const char* kWorkScope = "work";
  static constexpr const char* kOperatorScope = "operator";
  static constexpr const char* kTrainScope = "train";
  static constexpr const char* kValidateScope = "validate";
  // The per-request limits (HubLimits), by what they count.
  enum class Limit {
    kJoinPerAddress,
    kLeasePerWorker,
    kLeasePerAddress,
    kRolloutsPerWorker,
    kRolloutsPerAddress
  };

  explicit Identity(const HubConfig& config);

  // The configured tokens into the ledger (the join token as "default"); an operator token, and a
  // trainer token for a hub whose trainer dials in, made and written to <ledger dir>/<name>_token
  // at first start when none is configured or valid.
  void install(Ledger& ledger, int64_t now_ms);
  // Where the tokens made at first start were written ("" when configured, or none made).
  const std::string& operator_token_file() const { return operator_token_file_; }
  const std::string& trainer_token_file() const { return trainer_token_file_; }
  // Re-reads the tokens when another connection changed them (`stoa hub token revoke`), at most
  // every 500 ms.
  void refresh(Ledger& ledger);
  // The name of the valid (not revoked) token of `scope` that `bearer` is, if any.
  std::optional<std::string> match(const std::string& bearer, const std::string& scope) const;

  // ---- sessions ----
  struct IssuedSession {
    std::string token;  // handed to the worker, never kept
    std::string hash;   // SHA-256 of the token: the ledger's and this map's key
    int64_t expires_ms = 0;
  };
  IssuedSession issue_session(const std::string& worker_id, const std::string& token_name,
                              int64_t now_ms);
  // A session read back from the ledger at start (its token hashed).
  void restore_session(const std::string& hash, const std::string& worker_id,
                       const std::string& token_name, int64_t expires_ms);
  // The worker of session token `bearer`. RequestError 401 when it is unknown, expired or its
  // join token was revoked.
  std::string authenticate(const std::string& bearer, int64_t now_ms);
  // The join token name the newest session of `worker_id` was issued under ("" if none).
  std::string token_name_of(const std::string& worker_id) const;
  void end_sessions_of(const std::string& worker_id);
  void expire_sessions(int64_t now_ms);
  size_t sessions() const { return sessions_.size(); }

  // ---- rate limits ----
  // RequestError 429 (with the milliseconds to wait) when `key` is over `limit`; counted by `what`.
  void throttle(Limit limit, const std::string& key, const char* what);
  const std::map<std::string, int64_t>& rate_limited() const { return rate_limited_; }
  // A worker that expired: its per-worker buckets and its sessions go.
  void forget_worker(const std::string& worker_id);

 private:
  struct Session {
    std::string worker_id;
    std::string token_name;
    int64_t expires_ms = 0;
  };
  std::string install_scope_token(Ledger& ledger, const std::string& name, const char* scope,
                                  const std::string& configured, int64_t now_ms);
  RateLimiter& limiter(Limit limit);

  HubConfig config_;
  std::vector<JoinTokenRow> tokens_;  // named tokens, as the ledger has them
  int64_t tokens_data_version_ = -1;
  std::chrono::steady_clock::time_point tokens_checked_{};
  std::string operator_token_file_;
  std::string trainer_token_file_;
  std::map<std::string, Session> sessions_;  // SHA-256 of the session token -> session
  RateLimiter join_per_ip_, lease_per_worker_, lease_per_ip_, rollouts_per_worker_,
      rollouts_per_ip_;
  std::map<std::string, int64_t> rate_limited_;  // 429s, by limit
};

}  // namespace stoa::hub
