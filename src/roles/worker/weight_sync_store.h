// Where the weight sync keeps the verified weights: the one resident copy. WeightSync
// (weight_sync.h) fetches and checks blobs and runs the recovery ladder; a ResidentStore holds
// the state those blobs produce and hands it to the generation thread.
//   EngineStore (weight_sync_engine.h): the engine's own weights are the copy — what a worker
//     runs; no second full state.
//   StateStore (here): a pulse::Int8State beside whatever engine the caller builds from its
//     updates — for tests and tools that hold no engine.
//
// Threads: the sync thread calls the state-changing members (apply_patch, the anchor calls); the
// generation thread calls take_update and the pass lock at its safe points; the accessors may
// be called from anywhere.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/hash.h"
#include "engine/engine_weights.h"
#include "pulse/format.h"
#include "pulse/int8_state.h"
#include "pulse/patch.h"

namespace stoa::worker {

// A batch of changes for the engine: `full` after an anchor (every tensor), else the tensors
// patched since the last take — or, taken as kPatches, the verified patches themselves, which
// the engine scatters in place (engine_update.h: no tensor copies, no repack). From an
// EngineStore the changes are already in the engine when take_update returns: the update then
// carries no tensors and no patches, and `engine` holds the weights built from the first anchor
// (the caller's runner takes them; they never move, so the store keeps reading them).
struct WeightUpdate {
  uint64_t version = 0;
  Hash128 state_hash;
  bool full = false;
  std::vector<std::pair<std::string, pulse::StateTensor>> tensors;
  std::vector<pulse::Patch> patches;  // in order; set only for UpdateForm::kPatches
  std::unique_ptr<engine::EngineWeights> engine;
  // Tensors the sync already wrote into the engine's host weights (EngineStore): with `tensors`
  // and `patches`, what the engine backend is told was written (touched_tensors()).
  std::vector<std::string> written;
};
enum class UpdateForm {
  kTensors,  // copies of the touched tensors
  // The patches applied since the last take, when they are all still held (tensors otherwise:
  // after an anchor, or when they grew past 1/8 of the state's values).
  kPatches,
};

class ResidentStore {
 public:
  virtual ~ResidentStore() = default;

  virtual bool has_state() const = 0;
  virtual uint64_t version() const = 0;  // 0 without a state
  virtual Hash128 state_hash() const = 0;
  virtual Hash128 fingerprint() const = 0;
  // The bound decode_patch is given for the held model (pulse::patch_limits_for).
  virtual pulse::DecodeLimits patch_limits() const = 0;

  // Verifies `patch` against the held state — fingerprint, versions, structure, every touched
  // tensor's result hash and the whole-state hash — and makes its result the held state. All or
  // nothing: a refusal throws (kIntegrity / kBadFormat naming the tensor) and changes nothing.
  virtual void apply_patch(pulse::Patch patch) = 0;

  // An anchor, tensor by tensor, each tensor's hash already checked (pulse/anchor_stream.h):
  // begin_anchor once the envelope and config hash are known, anchor_tensor in name order, then
  // commit_anchor once the whole blob is proven (content address, fingerprint, state hash), or
  // abort_anchor after any failure.
  virtual void begin_anchor(const pulse::BlobHeader& header, const Hash128& config_hash) = 0;
  virtual void anchor_tensor(const std::string& name, pulse::StateTensor tensor,
                             const Hash128& hash) = 0;
  virtual void commit_anchor() = 0;
  virtual void abort_anchor() = 0;
  // True when loading an anchor writes over the held state as it streams (so an anchor that
  // failed part-way would leave no good state): the sync then proves the whole file first.
  virtual bool anchor_overwrites_state() const { return false; }

  // The verified state itself (a full copy; tests and the resume path).
  virtual pulse::Int8State snapshot() const = 0;

  // Generation thread, at a safe point (no pass running): the changes since the last take.
  virtual std::optional<WeightUpdate> take_update(UpdateForm form) = 0;
  // The same, only as far as `version` (a pipeline stage keeps the version its head names):
  // patches past it stay pending. A pending anchor is always taken, so the version held after
  // may be above `version`; nullopt when nothing up to it is pending. kUnsupported by default.
  virtual std::optional<WeightUpdate> take_update_through(uint64_t version);
  // The version the engine computes with (the verified version() may be ahead of it by the
  // updates not taken yet).
  virtual uint64_t engine_version() const { return version(); }
  // Generation thread: held while a pass computes with the weights (an anchor written in place
  // waits for it, and the pass waits for the anchor). Empty where the engine is the caller's own.
  virtual std::shared_lock<std::shared_mutex> pass_lock() { return {}; }
  // Generation thread: held while the engine's weights change outside an update — a device
  // backend taking them re-lays their linears (Linear::hold_grid) — so the sync reads no tensor
  // and writes no anchor meanwhile. Empty where the engine is the caller's own.
  virtual std::unique_lock<std::shared_mutex> exclusive_lock() { return {}; }
  // Whether the engine still computes with `version`, the last update the generation thread
  // took: false once an anchor was written into it in place since (its passes would compute
  // with the anchor's weights under the old version's name). True where the engine is the
  // caller's own (it changes only by the caller's updates).
  virtual bool engine_holds(uint64_t /*version*/) const { return true; }
  // False while the engine must not compute (an anchor written in place failed part-way: the
  // weights are a mix until the next anchor lands).
  virtual bool engine_usable() const { return true; }
  // Generation thread, before the runner holding the engine goes away.
  virtual void detach_engine() {}
};

// The Int8State store: the sync's own verified copy (the engine, if any, is built from updates).
class StateStore final : public ResidentStore {
 public:
  bool has_state() const override;
  uint64_t version() const override;
  Hash128 state_hash() const override;
  Hash128 fingerprint() const override;
  pulse::DecodeLimits patch_limits() const override;
  void apply_patch(pulse::Patch patch) override;
  void begin_anchor(const pulse::BlobHeader& header, const Hash128& config_hash) override;
  void anchor_tensor(const std::string& name, pulse::StateTensor tensor,
                     const Hash128& hash) override;
  void commit_anchor() override;
  void abort_anchor() override;
  pulse::Int8State snapshot() const override;
  std::optional<WeightUpdate> take_update(UpdateForm form) override;

 private:
  void reset_pending();
  mutable std::mutex mutex_;
  pulse::Int8State state_;
  bool have_state_ = false;
  std::optional<pulse::Int8State> incoming_;  // an anchor being read (sync thread only)
  bool full_pending_ = false;
  bool update_pending_ = false;
  std::set<std::string> touched_;
  // The patches applied since the last take (for UpdateForm::kPatches); dropped, with
  // patches_held_ false, once they would cost more than copying the touched tensors.
  std::vector<pulse::Patch> patches_;
  bool patches_held_ = true;
  uint64_t patch_values_ = 0;
};

}  // namespace stoa::worker
