#include "roles/worker/weight_sync_engine.h"

#include <chrono>
#include <cstdlib>  // defines __GLIBC__ on glibc
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <thread>
#include <utility>

#include "core/error.h"
#include "roles/worker/engine_update_patch.h"

namespace stoa::worker {

namespace {
// Hands the allocator's free pages back to the system (glibc: also those inside the heap).
void release_free_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}
}  // namespace

namespace {
std::set<std::string> span_tensor_names(const ModelConfig& config, std::optional<LayerSpan> span) {
  std::set<std::string> names;
  if (!span || span->whole(config)) return names;
  check_span(config, *span);
  for (const TensorSlot& slot : span_tensor_slots(config, *span)) names.insert(slot.name);
  return names;
}
}  // namespace

EngineStore::EngineStore(ModelConfig config, std::optional<LayerSpan> span)
    : config_(std::move(config)),
      span_(span && !span->whole(config_) ? span : std::nullopt),
      held_(span_tensor_names(config_, span)) {}
EngineStore::~EngineStore() = default;

// Readers step aside while a writer waits: the generation thread takes the pass lock for every
// decode pass and would otherwise keep a waiting anchor or scatter out indefinitely.
std::shared_lock<std::shared_mutex> EngineStore::read_lock() const {
  while (writers_waiting_.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  return std::shared_lock<std::shared_mutex>(gate_);
}

std::unique_lock<std::shared_mutex> EngineStore::write_lock() const {
  ++writers_waiting_;
  std::unique_lock<std::shared_mutex> lock(gate_);
  --writers_waiting_;
  return lock;
}

bool EngineStore::has_state() const {
  std::lock_guard lock(mutex_);
  return have_state_;
}

uint64_t EngineStore::version() const {
  std::lock_guard lock(mutex_);
  return have_state_ ? version_ : 0;
}

Hash128 EngineStore::state_hash() const {
  std::lock_guard lock(mutex_);
  return pulse::combine_state_hash(hashes_);
}

Hash128 EngineStore::fingerprint() const {
  std::lock_guard lock(mutex_);
  return layout_.fingerprint;
}

pulse::DecodeLimits EngineStore::patch_limits() const {
  std::lock_guard lock(mutex_);
  std::vector<pulse::TensorLayout> layouts;
  layouts.reserve(layout_.tensors.size());
  for (const auto& [name, t] : layout_.tensors) layouts.push_back(t);
  return pulse::patch_limits_for(layouts);
}

// Sync thread. Only this thread changes the layout, hashes and version (under mutex_, for the
// other threads' reads), so it reads them here without the lock; pending_ changes on the
// generation thread only under the exclusive gate, which the shared one held below excludes.
void EngineStore::apply_patch(pulse::Patch patch) {
  {
    std::lock_guard lock(mutex_);
    STOA_CHECK(engine_ != nullptr && have_state_ && !broken_, ErrorKind::kInvalidArgument, "patch ",
               patch.from_version, "->", patch.to_version, ": a patch needs a state to start from");
  }
  pulse::validate_patch(layout_, patch);
  std::map<std::string, Hash128> hashes = hashes_;
  std::vector<const pulse::TensorPatch*> layers;  // this tensor's pending patches, then tp
  for (const pulse::TensorPatch& tp : patch.tensors) {
    if (!holds(tp.name)) {
      // Another stage's tensor: its hash as the patch states it, which the whole-state hash
      // below holds to the trainer's.
      hashes[tp.name] = tp.result_hash;
      continue;
    }
    Hash128 got;
    {
      auto reading = read_lock();
      // detach_engine nulls engine_ under the exclusive gate: stable while the shared one is held.
      STOA_CHECK(engine_ != nullptr, ErrorKind::kInvalidArgument,
                 "the worker is stopping: no patch is applied any more");
      layers.clear();
      for (const pulse::Patch& earlier : pending_)
        if (const pulse::TensorPatch* e = find_tensor_patch(earlier, tp.name)) layers.push_back(e);
      layers.push_back(&tp);
      got = hash_patched_tensor(*engine_, layout_.tensors.at(tp.name), layers);
    }
    STOA_CHECK(got == tp.result_hash, ErrorKind::kIntegrity, "patch ", patch.from_version, "->",
               patch.to_version, ": tensor '", tp.name, "' hashes to ", got.hex(),
               " after applying, the patch says ", tp.result_hash.hex(),
               "; refused, weights left at version ", version_);
    hashes[tp.name] = got;
  }
  const Hash128 whole = pulse::combine_state_hash(hashes);
  STOA_CHECK(whole == patch.result_state_hash, ErrorKind::kIntegrity, "patch ", patch.from_version,
             "->", patch.to_version, ": the resulting state hashes to ", whole.hex(),
             ", the patch says ", patch.result_state_hash.hex(),
             "; refused, weights left at version ", version_);
  if (!held_.empty())
    std::erase_if(patch.tensors, [&](const pulse::TensorPatch& tp) { return !holds(tp.name); });
  std::lock_guard lock(mutex_);
  hashes_ = std::move(hashes);
  version_ = layout_.version = patch.to_version;
  pending_.push_back(std::move(patch));
  update_pending_ = true;
}

void EngineStore::begin_anchor(const pulse::BlobHeader& header, const Hash128& config_hash) {
  bool in_place = false;
  {
    std::lock_guard lock(mutex_);
    STOA_CHECK(!detached_, ErrorKind::kInvalidArgument,
               "the worker is stopping: no anchor is loaded any more");
    in_place = engine_ != nullptr;
  }
  Incoming in;
  in.version = header.to_version;
  in.config_hash = config_hash;
  if (in_place) {
    in.in_place = write_lock();  // generation waits until commit or abort
    // detach_engine may have run between the check above and the gate.
    std::lock_guard lock(mutex_);
    STOA_CHECK(!detached_ && engine_ != nullptr, ErrorKind::kInvalidArgument,
               "the worker is stopping: no anchor is loaded any more");
  } else if (span_) {
    in.building = std::make_unique<engine::EngineWeights>(
        engine::EngineWeights::begin_state(config_, *span_));
  } else {
    in.building =
        std::make_unique<engine::EngineWeights>(engine::EngineWeights::begin_state(config_));
  }
  incoming_.emplace(std::move(in));
}

void EngineStore::anchor_tensor(const std::string& name, pulse::StateTensor tensor,
                                const Hash128& hash) {
  Incoming& in = *incoming_;
  in.layouts.push_back({name, tensor.kind, tensor.shape});
  in.hashes.emplace(name, hash);
  if (!holds(name)) return;  // another stage's: its hash is all this one keeps
  if (in.building) return add_state_tensor(*in.building, name, std::move(tensor));
  auto held = layout_.tensors.find(name);
  STOA_CHECK(held != layout_.tensors.end() && held->second.kind == tensor.kind &&
                 held->second.shape == tensor.shape,
             ErrorKind::kIntegrity, "anchor tensor '", name, "' ",
             pulse::tensor_kind_name(tensor.kind), " ", shape_string(tensor.shape),
             " is not one the engine holds");
  {
    // From the first write the engine no longer holds a verified state until commit_anchor.
    std::lock_guard lock(mutex_);
    if (have_state_) {
      have_state_ = false;
      broken_ = true;
      pending_.clear();
      full_pending_ = update_pending_ = false;
    }
  }
  write_state_tensor(*engine_, name, std::move(tensor));
  // The old panels are freed as each new tensor is packed, but the allocator keeps the holes
  // resident (aligned allocations rarely fit a hole exactly, so the heap grows instead):
  // measured +0.71 x the state over an in-place anchor on the CI shape without this, vs one
  // tensor with it (tests/roles/worker/memory_test.cpp).
  release_free_heap();
}

void EngineStore::commit_anchor() {
  Incoming& in = *incoming_;
  if (in.building) {
    in.building->finish_state();  // kNotFound naming a tensor the anchor lacks
    const std::vector<pulse::TensorLayout> held = engine_layouts(*in.building);
    std::vector<const pulse::TensorLayout*> mine;
    for (const pulse::TensorLayout& t : in.layouts)
      if (holds(t.name)) mine.push_back(&t);
    STOA_CHECK(held.size() == mine.size(), ErrorKind::kIntegrity, "anchor has ", mine.size(),
               " tensors for this engine, the engine holds ", held.size());
    for (size_t i = 0; i < held.size(); ++i)
      STOA_CHECK(held[i].name == mine[i]->name && held[i].kind == mine[i]->kind &&
                     held[i].shape == mine[i]->shape,
                 ErrorKind::kIntegrity, "anchor tensor '", mine[i]->name, "' is ",
                 pulse::tensor_kind_name(mine[i]->kind), ", the engine holds '", held[i].name, "' ",
                 pulse::tensor_kind_name(held[i].kind));
  } else {
    STOA_CHECK(in.layouts.size() == layout_.tensors.size(), ErrorKind::kIntegrity, "anchor has ",
               in.layouts.size(), " tensors, the engine holds ", layout_.tensors.size());
  }
  std::lock_guard lock(mutex_);
  if (in.building) {
    owned_ = std::move(in.building);
    engine_ = owned_.get();
  }
  version_ = engine_version_ = in.version;  // in place: in the engine now; built: once taken
  config_hash_ = in.config_hash;
  hashes_ = std::move(in.hashes);
  anchor_state_hash_ = pulse::combine_state_hash(hashes_);
  layout_.version = in.version;
  layout_.fingerprint = pulse::model_fingerprint(in.config_hash, in.layouts);
  layout_.tensors.clear();
  for (pulse::TensorLayout& t : in.layouts) layout_.tensors.emplace(t.name, std::move(t));
  pending_.clear();
  have_state_ = true;
  broken_ = false;
  full_pending_ = update_pending_ = true;
  incoming_.reset();  // releases the gate
}

void EngineStore::abort_anchor() {
  incoming_.reset();  // a half-built engine is freed; the gate released
}

bool EngineStore::anchor_overwrites_state() const {
  std::lock_guard lock(mutex_);
  return engine_ != nullptr && have_state_;
}

pulse::Int8State EngineStore::snapshot() const {
  STOA_CHECK(!span_, ErrorKind::kUnsupported, "a pipeline stage holds ",
             span_string(config_, *span_), ", not a whole state to copy");
  auto reading = read_lock();
  std::lock_guard lock(mutex_);
  pulse::Int8State state;
  if (!have_state_) return state;
  for (const auto& [name, layout] : layout_.tensors) {
    pulse::StateTensor t = read_state_tensor(*engine_, layout);
    for (const pulse::Patch& p : pending_)
      if (const pulse::TensorPatch* tp = find_tensor_patch(p, name)) overlay_patch(t, *tp);
    state.add(name, std::move(t));
  }
  state.set_config_hash(config_hash_);
  state.set_version(version_);
  return state;
}

std::optional<WeightUpdate> EngineStore::take_update(UpdateForm /*form*/) {
  return take(std::nullopt);
}

std::optional<WeightUpdate> EngineStore::take_update_through(uint64_t version) {
  return take(version);
}

uint64_t EngineStore::engine_version() const {
  std::lock_guard lock(mutex_);
  return engine_version_;
}

std::optional<WeightUpdate> EngineStore::take(std::optional<uint64_t> through) {
  {
    std::lock_guard lock(mutex_);
    if (!have_state_ || broken_ || !update_pending_) return std::nullopt;
  }
  auto writing = write_lock();
  std::lock_guard lock(mutex_);
  if (!have_state_ || broken_ || !update_pending_) return std::nullopt;
  size_t taking = pending_.size();
  if (through) {
    taking = 0;
    while (taking < pending_.size() && pending_[taking].to_version <= *through) ++taking;
    if (taking == 0 && !full_pending_) return std::nullopt;
  }
  const std::span<const pulse::Patch> patches(pending_.data(), taking);
  // All or nothing: on a throw the engine is as it was and the patches stay pending.
  scatter_patches(*engine_, patches);
  WeightUpdate update;
  if (full_pending_ && !owned_) {
    // An anchor written into the runner's engine in place: every tensor it holds changed.
    for (const auto& [name, layout] : layout_.tensors)
      if (holds(name)) update.written.push_back(name);
  } else {
    for (const pulse::Patch& patch : patches)
      for (const pulse::TensorPatch& tp : patch.tensors) update.written.push_back(tp.name);
  }
  if (taking == pending_.size()) {
    update.version = version_;
    update.state_hash = pulse::combine_state_hash(hashes_);
  } else if (taking > 0) {
    update.version = pending_[taking - 1].to_version;
    update.state_hash = pending_[taking - 1].result_state_hash;
  } else {
    update.version = pending_.front().from_version;  // the anchor's, patches after it pending
    update.state_hash = anchor_state_hash_;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(taking));
  engine_version_ = update.version;
  update.full = full_pending_;
  update.engine = std::move(owned_);
  full_pending_ = false;
  update_pending_ = !pending_.empty();
  return update;
}

std::shared_lock<std::shared_mutex> EngineStore::pass_lock() {
  return read_lock();
}

bool EngineStore::engine_holds(uint64_t version) const {
  std::lock_guard lock(mutex_);
  return engine_version_ == version;
}

bool EngineStore::engine_usable() const {
  std::lock_guard lock(mutex_);
  return engine_ != nullptr && !broken_;
}

void EngineStore::detach_engine() {
  auto writing = write_lock();
  std::lock_guard lock(mutex_);
  engine_ = nullptr;
  owned_.reset();
  have_state_ = false;
  detached_ = true;
  pending_.clear();
}

}  // namespace stoa::worker
