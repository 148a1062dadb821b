// A pipeline group's rollout at intake (docs/design/pipeline.md, "Blame on the stage that
// lied"): its chain of signed stage commitments is checked against the group the hub formed
// before the rollout is accepted, so that a failed replay can later blame the stage that lied.
// The submitter is the group's head; every other signature is a key it never held. A chain that
// does not hold, a signature that does not verify or a head that is not this group's is the
// submitter's doing: an honest head checks the chain before it submits and cannot make a
// stage's signature.
#include "core/stage_commitment.h"
#include "roles/hub/hub.h"
#include "roles/hub/verification/verification.h"

namespace stoa::hub {

void Hub::set_pipeline_signers(PipelineSigners signers) {
  std::lock_guard<std::mutex> lock(mutex_);
  pipeline_signers_ = signers;
  verification_->set_pipeline_signers(std::move(signers));
}

std::optional<net::RolloutResponse> Hub::check_pipeline_proof_locked(
    const std::string& caller, const net::RolloutSubmission& m) {
  if (m.pipeline_group == 0) return std::nullopt;
  const std::string who = cat("rollout ", m.id, " of pipeline group ", m.pipeline_group);
  const std::optional<GroupSigners> signers =
      pipeline_signers_ ? pipeline_signers_(m.pipeline_group) : std::nullopt;
  // Not held against anyone: a group formed before the hub restarted (its keys lived in memory)
  // or forgotten long ago. Its head regroups.
  if (!signers)
    return reject("unknown_group", cat(who, ": the hub knows no such group (formed before a",
                                       " restart, or long gone)"));
  auto forged = [&](const std::string& detail) {
    verification_->caught(caller, m.kernel_target, cat(who, ": ", detail));
    return reject("bad_commitment", cat(who, ": ", detail));
  };
  if (signers->workers.empty() || signers->workers.front() != caller)
    return forged("the submitter is not the group's head");
  if (m.stage_commitments.size() != signers->workers.size())
    return forged(cat(m.stage_commitments.size(), " commitments for a group of ",
                      signers->workers.size(), " stages"));
  int at = 0;
  const std::string fault =
      chain_fault(m.stage_commitments, deps_.model ? deps_.model->num_layers : 0, &at);
  if (!fault.empty()) return forged(cat("the chain does not hold: ", fault));
  // Work a quarantined member took part in is not taken, and nobody else is blamed for it: the
  // group's rollouts in flight when one of its stages was caught lying.
  for (size_t s = 1; s < signers->workers.size(); ++s)
    if (verification_->quarantined(signers->workers[s]))
      return reject("quarantined_member",
                    cat(who, ": its stage ", s, " is quarantined (the group is being dissolved)"));
  for (size_t s = 0; s < signers->keys.size(); ++s)
    if (!commitment_signed_by(signers->keys[s], m.pipeline_group, m.stage_commitments[s]))
      return forged(cat("stage ", s, "'s commitment is not signed with its key (the head checks",
                        " every signature before it submits)"));
  return std::nullopt;
}

}  // namespace stoa::hub
