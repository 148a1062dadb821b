// The Hub's side of fair leasing (lease_fairness.h, docs/design/hub.md "Fair leasing"): the
// hoarding deadline and revocation. Who may lease what is decided in Hub::lease_locked.
#include "core/log.h"
#include "roles/hub/hub.h"

namespace stoa::hub {

int64_t Hub::hoard_deadline_ms() const {
  if (config_.hoard_min_tokens_per_s <= 0) return 0;
  const double tokens = static_cast<double>(config_.sampling.max_turns) *
                        static_cast<double>(config_.sampling.max_new_tokens);
  return config_.hoard_grace_ms +
         static_cast<int64_t>(1000.0 * tokens / config_.hoard_min_tokens_per_s);
}

void Hub::revoke_locked(const std::string& lease_id, const char* why, int64_t now_ms) {
  LeaseRow l = book_.leases().at(lease_id);
  l.state = LeaseState::kRevoked;
  ledger_->write([l](Ledger& ledger) { ledger.put_lease(l); });
  book_.set_lease(l, "", now());
  book_.fairness().hoarded(l.worker_id);
  log_warn("hub", "lease ", lease_id, " of worker ", l.worker_id, " revoked (", why, ", ",
           (now_ms - l.issued_ms) / 1000, " s after issue); its group ", l.group_id,
           " will be reissued");
}

}  // namespace stoa::hub
