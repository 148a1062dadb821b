// Peak memory of the worker's weight path with the engine as its one resident copy, on a
// CI-sized model (LFM2-350M's shape cut to 6 layers and an 8192-token vocabulary, ~117M
// parameters, int8 state S ~ 124 MB): the real WeightSync -> EngineStore -> engine path, the
// anchor streamed from its spool file. Issue 17's target for the seed's model is a peak of
// <= 1.15 x S + 512 MiB through anchor load, patch apply and generation; at this size the
// 512 MiB would hide everything, so the test holds the whole run to 1.15 x S.
// Each measurement runs in a forked child that allocated nothing big before it: the child resets
// its high-water mark (/proc/self/clear_refs) and reports VmHWM - VmRSS at its start.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "model/presets.h"
#include "model/weights.h"
#include "pulse/format.h"
#include "pulse/model_view.h"
#include "pulse/patch.h"
#include "pulse/pulse_test_util.h"
#include "roles/worker/weight_sync.h"
#include "support/peak_memory.h"
#include "support/sanitizer.h"

namespace stoa::worker {
namespace {

namespace fs = std::filesystem;

// The CI shape; STOA_WORKER_MEMORY_PRESET / STOA_WORKER_MEMORY_LAYERS measure another cut by
// hand (docs/design/scale.md: 8 layers of lfm2-8b-a1b, under flock /tmp/bigmem.lock).
ModelConfig measured_config() {
  const char* preset = std::getenv("STOA_WORKER_MEMORY_PRESET");
  const char* layers = std::getenv("STOA_WORKER_MEMORY_LAYERS");
  ModelConfig c = preset_config(preset ? preset : "lfm2-350m");
  if (!preset) c.vocab_size = 8192;
  c.num_layers = layers ? std::atoi(layers) : 6;
  c.layer_kinds.resize(static_cast<size_t>(c.num_layers));
  validate_model_config(c, "the measured cut");
  return c;
}

// An int8 state of `config`'s every tensor, each in the kind the precision plan gives it, with
// pseudo-random int8 values (no f32 masters: the state is all a worker ever sees).
pulse::Int8State model_state(const ModelConfig& config) {
  pulse::Int8State state;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (const TensorSpec& spec : expected_tensors(config)) {
    const pulse::TensorKind kind = pulse::tensor_kind_for(spec.name, spec.shape);
    const auto n = static_cast<size_t>(shape_numel(spec.shape));
    if (kind == pulse::TensorKind::kInt8) {
      Int8Matrix q;
      q.rows = spec.shape[0];
      q.cols = spec.shape[1];
      q.values.resize(n);
      for (size_t i = 0; i < n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for (size_t b = 0; b < 8 && i + b < n; ++b)
          q.values[i + b] = static_cast<int8_t>((x >> (8 * b)) % 61) - 30;
      }
      q.scales.assign(n / kInt8GroupSize, 0x2000);
      state.add_int8(spec.name, std::move(q));
    } else if (kind == pulse::TensorKind::kBf16) {
      state.add_bf16(spec.name, spec.shape, std::vector<uint16_t>(n, 0x3f80));  // 1.0
    } else {
      state.add_f32(spec.name, spec.shape, std::vector<uint32_t>(n, 0));
    }
  }
  state.set_config_hash(pulse::config_hash(config));
  state.set_version(1);
  return state;
}

// A patch moving about one int8 value in `one_in` by one step (the sparsity of an AdamW step at
// lr 1e-6), applied to `state` in place: one tensor's scratch copy at a time, so that the 8-layer
// cut of the seed's model can be made beside its one state.
pulse::Patch step_in_place(pulse::Int8State& state, uint32_t one_in, uint64_t seed) {
  pulse::Patch patch;
  patch.from_version = state.version();
  patch.to_version = state.version() + 1;
  patch.fingerprint = state.fingerprint();
  std::map<std::string, Hash128> hashes;
  uint64_t x = seed * 0xD1B54A32D192ED03ull + 7;
  for (const auto& [name, t] : state.tensors()) {
    hashes[name] = state.tensor_hash(name);
    if (t.kind != pulse::TensorKind::kInt8) continue;
    pulse::TensorPatch tp;
    tp.name = name;
    tp.kind = t.kind;
    tp.shape = t.shape;
    for (size_t i = 0; i < t.q.values.size(); ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      if (x % one_in != 0) continue;
      tp.positions.push_back(i);
      tp.i8.push_back(static_cast<int8_t>(t.q.values[i] == 30 ? 29 : t.q.values[i] + 1));
    }
    if (tp.positions.empty()) continue;
    pulse::StateTensor after = t;
    for (size_t i = 0; i < tp.positions.size(); ++i) after.q.values[tp.positions[i]] = tp.i8[i];
    tp.result_hash = hashes[name] = after.compute_hash();
    patch.tensors.push_back(std::move(tp));
  }
  patch.result_state_hash = pulse::combine_state_hash(hashes);
  pulse::apply_patch(state, patch);
  return patch;
}

// Runs `prepare` then `body` in a child (support/peak_memory.h); returns the bytes its peak RSS
// rose during `body` above its RSS when `body` started (-1 when something threw) and how long
// `body` took.
struct ChildResult {
  int64_t growth = -1;
  double seconds = 0;
};
ChildResult in_child(const std::function<void()>& prepare, const std::function<void()>& body) {
  const stoa::testing::ChildPeak peak =
      stoa::testing::child_peak(prepare, [&](std::array<double, 8>& out) {
        const auto t0 = std::chrono::steady_clock::now();
        body();
        out[0] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      });
  return {peak.growth, peak.figures[0]};
}

// The hub's side from files: every blob a spool file (so anchors stream from disk, as on a
// worker), a route per version held.
class FileHub final : public BlobSource {
 public:
  explicit FileHub(fs::path dir) : dir_(std::move(dir)) {}
  net::VersionInfo version(std::optional<uint64_t> after, std::chrono::seconds) override {
    auto it = routes.find(after.value_or(0));
    if (it != routes.end()) return it->second;
    net::VersionInfo current;  // nothing newer
    current.version = after;
    return current;
  }
  std::vector<uint8_t> blob(const std::string&) override {
    fail(ErrorKind::kInternal, "FileHub serves files");
  }
  std::optional<std::string> blob_file(const std::string& hash) override {
    return (dir_ / (hash + ".blob")).string();
  }
  // discard() keeps the files: each child reuses them.
  // Route for a worker holding `after` (0: cold): `kind` blob from -> to, written to a file.
  void add(uint64_t after, const std::string& kind, uint64_t from, uint64_t to,
           const std::vector<uint8_t>& bytes, const Hash128& state_hash) {
    const Hash128 h = hash_bytes(bytes.data(), bytes.size());
    std::ofstream(dir_ / (h.hex() + ".blob"), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    net::VersionInfo info;
    info.version = to;
    info.state_hash = state_hash.hex();
    info.blobs.push_back(net::BlobRef{kind, from, to, h.hex(), bytes.size()});
    routes[after] = info;
  }
  std::map<uint64_t, net::VersionInfo> routes;  // keyed by the version held (0: none)

 private:
  fs::path dir_;
};

TEST(WorkerMemory, AnchorLoadAndPatchApplyStayWithinOnePointOneFiveTimesTheState) {
  if (stoa::testing::kSanitizerShadowsMemory)
    GTEST_SKIP() << stoa::testing::kNoMemoryBoundsUnderSanitizer;
  const ModelConfig config = measured_config();
  const fs::path dir =
      fs::temp_directory_path() / ("stoa_worker_memory_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() { fs::remove_all(d); }
  } cleanup{dir};
  // The blobs, made in a child so that this process never holds a state (a fork inherits it).
  const std::string routes_file = (dir / "routes").string();
  int64_t state_bytes = 0;
  {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      int64_t bytes = -1;
      try {
        FileHub hub(dir);
        pulse::Int8State state = model_state(config);
        const auto nbytes = static_cast<int64_t>(state.nbytes());
        hub.add(0, "anchor", 1, 1, pulse::encode_anchor(state), state.state_hash());
        const pulse::Patch patch = step_in_place(state, 200, 3);  // ~0.5% of the values
        hub.add(1, "patch", 1, 2, pulse::encode_patch(patch), state.state_hash());
        // Version 3: the same values under a new version, sent as an anchor (every tensor
        // written again).
        state.set_version(3);
        hub.add(2, "anchor", 3, 3, pulse::encode_anchor(state), state.state_hash());
        std::ofstream out(routes_file);
        for (const auto& [after, info] : hub.routes) {
          const net::BlobRef& b = info.blobs.front();
          out << after << ' ' << b.kind << ' ' << b.from_version << ' ' << b.to_version << ' '
              << b.hash << ' ' << b.bytes << ' ' << info.state_hash << '\n';
        }
        bytes = nbytes;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
      }
      (void)!::write(fds[1], &bytes, sizeof(bytes));
      std::_Exit(0);
    }
    ::close(fds[1]);
    ASSERT_EQ(::read(fds[0], &state_bytes, sizeof(state_bytes)),
              static_cast<ssize_t>(sizeof(state_bytes)));
    ::close(fds[0]);
    ::waitpid(pid, nullptr, 0);
    ASSERT_GT(state_bytes, 0);
  }
  FileHub hub(dir);
  {
    std::ifstream in(routes_file);
    uint64_t after;
    net::BlobRef b;
    std::string state_hash;
    while (in >> after >> b.kind >> b.from_version >> b.to_version >> b.hash >> b.bytes >>
           state_hash) {
      net::VersionInfo info;
      info.version = b.to_version;
      info.state_hash = state_hash;
      info.blobs.push_back(b);
      hub.routes[after] = info;
    }
    ASSERT_EQ(hub.routes.size(), 3u);
  }
  const net::VersionInfo patch_route = hub.routes.at(1);
  const net::VersionInfo second_anchor = hub.routes.at(2);
  // Step by step: the sync's route for the held version, then the generation thread's take.
  // Each step's split (printed by the child): the sync thread's part (fetch, decode, verify)
  // and the generation thread's pause (take_update: the scatter).
  auto sync_to = [&](WeightSync& sync, std::unique_ptr<engine::EngineWeights>& engine,
                     uint64_t want) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!sync.step(std::chrono::seconds(0)) || sync.version() != want)
      throw std::runtime_error("sync did not reach version " + std::to_string(want) + ": " +
                               sync.last_error());
    const auto t1 = std::chrono::steady_clock::now();
    auto update = sync.take_update(UpdateForm::kPatches);
    if (!update) throw std::runtime_error("no update");
    const auto t2 = std::chrono::steady_clock::now();
    if (update->engine) engine = std::move(update->engine);
    std::printf("    to version %llu: sync thread %.3f s, generation pause %.3f s\n",
                static_cast<unsigned long long>(want),
                std::chrono::duration<double>(t1 - t0).count(),
                std::chrono::duration<double>(t2 - t1).count());
    std::fflush(stdout);
  };
  std::optional<WeightSync> sync;
  std::unique_ptr<engine::EngineWeights> engine;
  hub.routes.erase(1);
  hub.routes.erase(2);
  const ChildResult anchor =
      in_child([&] { sync.emplace(hub, config); }, [&] { sync_to(*sync, engine, 1); });
  hub.routes[1] = patch_route;
  const ChildResult patch = in_child(
      [&] {
        sync.emplace(hub, config);
        sync_to(*sync, engine, 1);
      },
      [&] { sync_to(*sync, engine, 2); });
  const ChildResult whole = in_child([&] { sync.emplace(hub, config); },
                                     [&] {
                                       sync_to(*sync, engine, 1);
                                       sync_to(*sync, engine, 2);
                                     });
  hub.routes[2] = second_anchor;  // a fallback-like anchor onto the engine held: in place
  const ChildResult in_place = in_child(
      [&] {
        sync.emplace(hub, config);
        sync_to(*sync, engine, 1);
        sync_to(*sync, engine, 2);
      },
      [&] { sync_to(*sync, engine, 3); });
  const double s = static_cast<double>(state_bytes);
  std::printf(
      "int8 state S = %.1f MB, patch blob %.2f MB\n"
      "  anchor from file into a new engine: +%.1f MB (%.3f x S), %.2f s\n"
      "  patch verified + scattered in place: +%.1f MB (%.3f x S), %.3f s\n"
      "  anchor then patch, whole run: +%.1f MB (%.3f x S)\n"
      "  second anchor written in place: +%.1f MB (%.3f x S), %.2f s\n",
      s / 1e6, static_cast<double>(patch_route.blobs.front().bytes) / 1e6, anchor.growth / 1e6,
      anchor.growth / s, anchor.seconds, patch.growth / 1e6, patch.growth / s, patch.seconds,
      whole.growth / 1e6, whole.growth / s, in_place.growth / 1e6, in_place.growth / s,
      in_place.seconds);
  ASSERT_GT(anchor.growth, 0);
  ASSERT_GT(patch.growth, 0);
  ASSERT_GT(whole.growth, 0);
  ASSERT_GT(in_place.growth, 0);
  EXPECT_LE(anchor.growth, 1.15 * s);
  EXPECT_LE(whole.growth, 1.15 * s);
  // On top of the engine: one tensor's copy, the patch and its undo log — not the touched
  // tensors (~1 x S) nor a second state.
  EXPECT_LE(patch.growth, 0.15 * s);
  EXPECT_LE(in_place.growth, 0.15 * s);
}

}  // namespace
}  // namespace stoa::worker
