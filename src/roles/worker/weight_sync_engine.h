// The engine's weights as the worker's one resident copy of the int8 state (issue 17: a worker
// holding LFM2-8B-A1B must fit a 16 GB laptop, so there is no second full state beside them).
//
// What the store keeps besides the engine: per-tensor hashes (xxh3-128, PULSE's canonical form),
// the version, the fingerprint and the tensors' layouts — a few KB.
//
// Patches (every version; small): the sync thread verifies a patch off to the side — for each
// touched tensor it reads the tensor out of the engine in PULSE's canonical form (one tensor's
// copy), writes the pending patches and this one over it, and checks the tensor's result hash;
// then the whole-state hash — while the generation thread keeps computing with the same
// weights (both only read). The verified patch waits in `pending_`; the generation thread writes
// it into the engine in place at its next safe point (take_update), with an undo log
// (engine_update_patch.h), so the pause in generation is the scatter of ~0.5% of the values.
//
// Anchors (start-up, fallback; rare): the first anchor builds the engine tensor by tensor as it
// streams from its file (each tensor packed as it arrives: one tensor's grid copy alive). A later
// anchor is written into the engine in place, tensor by tensor, while generation waits (the
// runner, its sequences and KV caches stay). Before writing over a good state the sync proves
// the whole file by its content address, so a transfer error never costs the held weights; an
// anchor that still fails part-way (a hub that signed a bad blob) leaves the engine unusable
// until the next anchor lands — never computing with a mix.
//
// Locks: `gate_` (shared: a decode pass, the verification's read of one tensor; exclusive: the
// scatter at a safe point, an anchor written in place), always taken before `mutex_` (the
// bookkeeping). A writer announces itself in `writer_waiting_` so that readers let it in.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/layer_span.h"
#include "roles/worker/weight_sync_store.h"

namespace stoa::worker {

// A pipeline stage's store holds only its span's tensors (model/layer_span.h): it verifies the
// tensors it holds against the patches' per-tensor result hashes and keeps the others' hashes
// as the anchor and the patches state them, so the whole-state hash — the trainer's — still
// checks the per-tensor hashes its own tensors were verified against.
class EngineStore final : public ResidentStore {
 public:
  explicit EngineStore(ModelConfig config, std::optional<LayerSpan> span = std::nullopt);
  ~EngineStore() override;

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
  bool anchor_overwrites_state() const override;
  pulse::Int8State snapshot() const override;
  // Scatters the verified patches into the engine (any form: the engine is the copy).
  std::optional<WeightUpdate> take_update(UpdateForm form) override;
  std::optional<WeightUpdate> take_update_through(uint64_t version) override;
  uint64_t engine_version() const override;
  std::shared_lock<std::shared_mutex> pass_lock() override;
  std::unique_lock<std::shared_mutex> exclusive_lock() override { return write_lock(); }
  bool engine_holds(uint64_t version) const override;
  bool engine_usable() const override;
  void detach_engine() override;

 private:
  std::shared_lock<std::shared_mutex> read_lock() const;
  std::unique_lock<std::shared_mutex> write_lock() const;
  std::optional<WeightUpdate> take(std::optional<uint64_t> through);
  bool holds(const std::string& name) const { return held_.empty() || held_.count(name) > 0; }

  const ModelConfig config_;
  const std::optional<LayerSpan> span_;  // nullopt: the whole model
  const std::set<std::string> held_;     // the span's tensors (empty: every tensor)
  mutable std::shared_mutex gate_;
  mutable std::atomic<int> writers_waiting_{0};
  mutable std::mutex mutex_;  // guards what follows; after gate_ when both are held
  // The weights built from the first anchor until the generation thread takes them.
  std::unique_ptr<engine::EngineWeights> owned_;
  engine::EngineWeights* engine_ = nullptr;  // the one copy (owned_ or the runner's)
  bool have_state_ = false;
  bool broken_ = false;          // an in-place anchor failed part-way
  bool detached_ = false;        // the runner is gone: no more anchors
  uint64_t version_ = 0;         // verified
  uint64_t engine_version_ = 0;  // in the engine (pending updates not yet taken)
  Hash128 anchor_state_hash_;    // of the last anchor committed
  Hash128 config_hash_;
  pulse::HeldLayout layout_;
  std::map<std::string, Hash128> hashes_;
  std::vector<pulse::Patch> pending_;  // verified, not yet in the engine
  bool full_pending_ = false;
  bool update_pending_ = false;

  // An anchor being read (sync thread only).
  struct Incoming {
    uint64_t version = 0;
    Hash128 config_hash;
    std::unique_ptr<engine::EngineWeights> building;  // no engine yet: built as it streams
    std::unique_lock<std::shared_mutex> in_place;     // else: written over the engine's
    std::map<std::string, Hash128> hashes;
    std::vector<pulse::TensorLayout> layouts;
  };
  std::optional<Incoming> incoming_;
};

}  // namespace stoa::worker
