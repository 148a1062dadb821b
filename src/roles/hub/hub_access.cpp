// Who may call what (hub_access.h): every check refreshes the Identity from the ledger under the
// hub's lock, then matches the bearer against the scope the route needs.
#include "roles/hub/hub_access.h"

#include "roles/hub/hub_state.h"
#include "roles/hub/request_error.h"
#include "roles/hub/verification/verification.h"

namespace stoa::hub {

std::string HubAccess::authenticate(const std::string& bearer) {
  std::lock_guard<std::mutex> lock(state_.mutex_);
  state_.identity_.refresh(state_.ledger_->reader());
  const std::string worker_id = state_.identity_.authenticate(bearer, state_.now());
  if (state_.verification_->quarantined(worker_id))
    throw RequestError(403, "worker " + worker_id + " is quarantined (a rollout failed replay)");
  return worker_id;
}

void HubAccess::check_operator(const std::string& bearer, bool loopback) {
  if (loopback) return;
  std::lock_guard<std::mutex> lock(state_.mutex_);
  state_.identity_.refresh(state_.ledger_->reader());
  if (!state_.identity_.match(bearer, Identity::kOperatorScope)) {
    throw RequestError(401,
                       "operator token required (Authorization: Bearer <token>; a browser "
                       "logs in at /login)");
  }
}

void HubAccess::check_trainer(const std::string& bearer) {
  if (bearer.empty())
    throw RequestError(401, "trainer: missing Authorization: Bearer <trainer token>");
  std::lock_guard<std::mutex> lock(state_.mutex_);
  state_.identity_.refresh(state_.ledger_->reader());
  if (!state_.identity_.match(bearer, Identity::kTrainScope))
    throw RequestError(403, "trainer: the token is not a valid token of scope train");
}

bool HubAccess::is_validator(const std::string& bearer) {
  std::lock_guard<std::mutex> lock(state_.mutex_);
  state_.identity_.refresh(state_.ledger_->reader());
  // Both scopes are always compared: the time does not depend on which one matched.
  const bool op = state_.identity_.match(bearer, Identity::kOperatorScope).has_value();
  const bool validate = state_.identity_.match(bearer, Identity::kValidateScope).has_value();
  return op || validate;
}

void HubAccess::check_validator(const std::string& bearer) {
  if (bearer.empty())
    throw RequestError(401,
                       "validation: missing Authorization: Bearer <operator or validate token>");
  if (!is_validator(bearer))
    throw RequestError(403, "validation: the token is not an operator or validate token");
}

const std::string& HubAccess::operator_token_file() const {
  return state_.identity_.operator_token_file();
}

const std::string& HubAccess::trainer_token_file() const {
  return state_.identity_.trainer_token_file();
}

}  // namespace stoa::hub
