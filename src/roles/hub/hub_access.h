// Who may call what at the hub's door: the bearer token a request carries, checked against the
// token scopes the Identity holds (identity/identity.h: join, worker sessions, operator, train,
// validate). Each call takes the hub's lock and first refreshes the Identity from the ledger, so a
// token revoked by `stoa token revoke` is refused at once. The HTTP routes (http/) call it
// through Hub::access() before they map a request onto the Hub; it lives as long as its Hub.
#pragma once
#include <string>

namespace stoa::hub {

struct HubState;

class HubAccess {
 public:
  explicit HubAccess(HubState& state) : state_(state) {}
  HubAccess(const HubAccess&) = delete;
  HubAccess& operator=(const HubAccess&) = delete;

  // The worker id for a session token; RequestError(401) if unknown, expired or its join token
  // was revoked, 403 if the worker is quarantined.
  std::string authenticate(const std::string& bearer);
  // The dashboard, /v1/status and /metrics: open when the hub binds to loopback, otherwise a
  // token of scope `operator` is required (RequestError 401).
  void check_operator(const std::string& bearer, bool loopback);
  // The trainer routes (http/trainer_routes.cpp): RequestError 401 without a token, 403 for one
  // that is not of scope `train`.
  void check_trainer(const std::string& bearer);
  // The validation routes (`stoa validate --hub URL`): a token of scope `operator` or `validate`
  // is required even when the hub binds to loopback, since a verdict can quarantine a worker.
  // RequestError 401 without a token, 403 for one that is not a validator's.
  void check_validator(const std::string& bearer);
  bool is_validator(const std::string& bearer);
  // Where the operator and trainer tokens made at first start were written ("" when one was
  // configured).
  const std::string& operator_token_file() const;
  const std::string& trainer_token_file() const;

 private:
  HubState& state_;
};

}  // namespace stoa::hub
