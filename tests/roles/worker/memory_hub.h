// A hub's blob side held in memory for the worker tests: real PULSE anchors and patches of a
// simulated training run, a real pulse::Catalog planning the routes, and a tamper hook that
// corrupts or truncates what is served (the fault the sync must refuse).
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "pulse/catalog.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "roles/worker/weight_sync.h"

namespace stoa::worker::testing {

class MemoryHub final : public BlobSource {
 public:
  // Publishes `state` (version = state.version()): a patch from `prev` if given, an anchor if
  // asked. The state hash announced is the state's own unless overridden.
  void publish(const pulse::Int8State& state, const pulse::Int8State* prev, bool anchor) {
    if (prev)
      add(pulse::BlobKind::kPatch, prev->version(), state.version(),
          pulse::encode_patch(pulse::make_patch(*prev, state)));
    if (anchor)
      add(pulse::BlobKind::kAnchor, state.version(), state.version(), pulse::encode_anchor(state));
    state_hashes[state.version()] = state.state_hash().hex();
  }

  net::VersionInfo version(std::optional<uint64_t> after, std::chrono::seconds) override {
    ++version_calls;
    net::VersionInfo info;
    info.max_staleness = 4;
    auto latest = catalog.latest_version();
    if (!latest) return info;
    info.version = latest;
    info.state_hash = state_hashes.at(*latest);
    if (after && *after >= *latest) return info;
    for (const pulse::CatalogEntry& e : catalog.plan(after, *latest)) {
      net::BlobRef ref;
      ref.kind = e.kind == pulse::BlobKind::kAnchor ? "anchor" : "patch";
      ref.from_version = e.from_version;
      ref.to_version = e.to_version;
      ref.hash = e.hash.hex();
      ref.bytes = e.bytes;
      info.blobs.push_back(ref);
    }
    return info;
  }

  std::vector<uint8_t> blob(const std::string& hash_hex) override {
    auto it = blobs.find(hash_hex);
    STOA_CHECK(it != blobs.end(), ErrorKind::kNotFound, "blob ", hash_hex);
    std::vector<uint8_t> bytes = it->second;
    ++fetches[hash_hex];
    if (tamper) tamper(hash_hex, bytes);
    return bytes;
  }

  std::string hash_of(pulse::BlobKind kind, uint64_t from, uint64_t to) const {
    for (const auto& e : catalog.entries())
      if (e.kind == kind && e.from_version == from && e.to_version == to) return e.hash.hex();
    fail(ErrorKind::kNotFound, "no such blob");
  }

  pulse::Catalog catalog;
  std::map<std::string, std::vector<uint8_t>> blobs;
  std::map<uint64_t, std::string> state_hashes;
  std::map<std::string, int> fetches;
  int version_calls = 0;
  std::function<void(const std::string&, std::vector<uint8_t>&)> tamper;

 private:
  void add(pulse::BlobKind kind, uint64_t from, uint64_t to, std::vector<uint8_t> bytes) {
    pulse::CatalogEntry e;
    e.kind = kind;
    e.from_version = from;
    e.to_version = to;
    e.hash = hash_bytes(bytes.data(), bytes.size());
    e.bytes = bytes.size();
    catalog.add(e);
    blobs[e.hash.hex()] = std::move(bytes);
  }
};

// Anchor `state` through the store's own calls (what the streaming decoder feeds it).
inline void load_anchor(ResidentStore& store, const pulse::Int8State& state) {
  const pulse::BlobHeader header = pulse::read_header(pulse::encode_anchor(state), "anchor");
  store.begin_anchor(header, state.config_hash());
  for (const auto& [name, t] : state.tensors())
    store.anchor_tensor(name, t, state.tensor_hash(name));
  store.commit_anchor();
}

}  // namespace stoa::worker::testing
