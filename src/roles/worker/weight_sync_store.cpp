#include "roles/worker/weight_sync_store.h"

#include "core/error.h"

namespace stoa::worker {

std::optional<WeightUpdate> ResidentStore::take_update_through(uint64_t version) {
  fail(ErrorKind::kUnsupported, "this weight store cannot stop at version ", version,
       " (a pipeline stage keeps its weights in the engine)");
}

bool StateStore::has_state() const {
  std::lock_guard lock(mutex_);
  return have_state_;
}

uint64_t StateStore::version() const {
  std::lock_guard lock(mutex_);
  return have_state_ ? state_.version() : 0;
}

Hash128 StateStore::state_hash() const {
  std::lock_guard lock(mutex_);
  return state_.state_hash();
}

Hash128 StateStore::fingerprint() const {
  std::lock_guard lock(mutex_);
  return state_.fingerprint();
}

pulse::DecodeLimits StateStore::patch_limits() const {
  std::lock_guard lock(mutex_);
  return pulse::patch_limits_for(state_);
}

void StateStore::apply_patch(pulse::Patch patch) {
  std::lock_guard lock(mutex_);
  STOA_CHECK(have_state_, ErrorKind::kInvalidArgument, "patch ", patch.from_version, "->",
             patch.to_version, ": a patch needs a state to start from");
  pulse::apply_patch(state_, patch);  // all or nothing; checks fingerprint and hashes
  for (const pulse::TensorPatch& t : patch.tensors) touched_.insert(t.name);
  if (!full_pending_ && patches_held_) {
    patch_values_ += patch.values_written();
    patches_held_ = patch_values_ <= static_cast<uint64_t>(state_.numel()) / 8;
    if (patches_held_)
      patches_.push_back(std::move(patch));
    else
      patches_.clear();
  }
  update_pending_ = true;
}

void StateStore::begin_anchor(const pulse::BlobHeader& header, const Hash128& config_hash) {
  incoming_.emplace();
  incoming_->set_version(header.to_version);
  incoming_->set_config_hash(config_hash);
}

void StateStore::anchor_tensor(const std::string& name, pulse::StateTensor tensor,
                               const Hash128& hash) {
  incoming_->add_hashed(name, std::move(tensor), hash);
}

void StateStore::commit_anchor() {
  std::lock_guard lock(mutex_);
  state_ = std::move(*incoming_);
  incoming_.reset();
  have_state_ = true;
  reset_pending();
  full_pending_ = true;
  update_pending_ = true;
}

void StateStore::abort_anchor() {
  incoming_.reset();
}

pulse::Int8State StateStore::snapshot() const {
  std::lock_guard lock(mutex_);
  return state_;
}

void StateStore::reset_pending() {
  full_pending_ = false;
  update_pending_ = false;
  touched_.clear();
  patches_.clear();
  patches_held_ = true;
  patch_values_ = 0;
}

std::optional<WeightUpdate> StateStore::take_update(UpdateForm form) {
  std::lock_guard lock(mutex_);
  if (!have_state_ || !update_pending_) return std::nullopt;
  WeightUpdate update;
  update.version = state_.version();
  update.state_hash = state_.state_hash();
  update.full = full_pending_;
  if (form == UpdateForm::kPatches && !full_pending_ && patches_held_) {
    update.patches = std::move(patches_);
  } else if (full_pending_) {
    for (const auto& [name, tensor] : state_.tensors()) update.tensors.emplace_back(name, tensor);
  } else {
    for (const std::string& name : touched_) update.tensors.emplace_back(name, state_.at(name));
  }
  reset_pending();
  return update;
}

}  // namespace stoa::worker
