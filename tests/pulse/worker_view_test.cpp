// The precision plan end to end: the weights a worker's engine computes with, built from PULSE
// state through the worker's update path (roles/worker/engine_update), are the trainer's view —
// the MoE router and expert_bias the f32 master bits, the linears PULSE's int8 grid — and they
// agree with the engine's own int8 load of the same masters. A patch that moves the router lands
// in the engine bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/engine_weights.h"
#include "engine/model_runner.h"
#include "model/precision_plan.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse_test_util.h"
#include "roles/worker/engine_update.h"
#include "roles/worker/memory_hub.h"

namespace stoa::pulse {
namespace {

bool same_f32(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// The f32 values the engine holds for tensor `name` (an f32 linear or a vector).
const float* engine_f32(const engine::EngineWeights& e, const std::string& name, int64_t numel) {
  if (e.has_linear(name)) {
    EXPECT_FALSE(e.linear(name).is_int8()) << name;
    return e.linear(name).f32().as<float>();
  }
  return e.vec(name, numel);
}

// Every tensor of `state` is in the engine exactly as PULSE carries it.
void expect_engine_holds(const engine::EngineWeights& e, const Int8State& state) {
  for (const auto& [name, t] : state.tensors()) {
    SCOPED_TRACE(name);
    if (t.kind == TensorKind::kInt8) {
      ASSERT_TRUE(e.has_linear(name));
      ASSERT_TRUE(e.linear(name).is_int8());
      EXPECT_EQ(e.linear(name).int8().values, t.q.values);
      EXPECT_EQ(e.linear(name).int8().scales, t.q.scales);
    } else if (t.kind == TensorKind::kF32) {
      std::vector<float> want(t.f32.size());
      std::memcpy(want.data(), t.f32.data(), want.size() * sizeof(float));
      EXPECT_TRUE(same_f32(engine_f32(e, name, t.numel()), want.data(), t.numel()));
    } else {
      std::vector<float> want(t.bf16.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = bf16_to_f32(t.bf16[i]);
      EXPECT_TRUE(same_f32(engine_f32(e, name, t.numel()), want.data(), t.numel()));
    }
  }
}

worker::WeightUpdate update_of(const Int8State& s, bool full, const Patch* patch = nullptr) {
  worker::WeightUpdate u;
  u.version = s.version();
  u.state_hash = s.state_hash();
  u.full = full;
  if (full) {
    for (const auto& [name, t] : s.tensors()) u.tensors.emplace_back(name, t);
  } else {
    for (const auto& tp : patch->tensors) u.tensors.emplace_back(tp.name, s.at(tp.name));
  }
  return u;
}

TEST(PulseWorkerView, EngineComputesOnTheTrainersView) {
  ModelConfig config = preset_config("tiny-lfm2moe");
  ModelWeights w = random_weights(config, 21);
  Int8Quantizer quant;
  Int8State v0 = int8_view_of(w, 0, &quant);
  Int8State worker_state = decode_anchor(encode_anchor(v0));
  engine::EngineWeights e =
      worker::engine_weights_from_update(config, update_of(worker_state, true));
  expect_engine_holds(e, v0);

  // The engine's own int8 load of the masters agrees where the plan says it must: router and
  // expert_bias are the master f32 bits, the int8 linears the same Q8_0 grid (fresh at v0).
  engine::EngineWeights direct = engine::EngineWeights::from_model(w, engine::WeightFormat::kInt8);
  int f32_tensors = 0;
  for (const auto& [name, t] : v0.tensors()) {
    SCOPED_TRACE(name);
    const Tensor& master = w.at(name);
    if (t.kind == TensorKind::kF32) {
      ++f32_tensors;
      EXPECT_TRUE(same_f32(engine_f32(direct, name, t.numel()), master.as<float>(), t.numel()));
      EXPECT_TRUE(same_f32(engine_f32(e, name, t.numel()), master.as<float>(), t.numel()));
    } else if (t.kind == TensorKind::kInt8) {
      ASSERT_TRUE(direct.linear(name).is_int8());
      EXPECT_EQ(direct.linear(name).int8().values, t.q.values);
      EXPECT_EQ(direct.linear(name).int8().scales, t.q.scales);
    }
  }
  EXPECT_EQ(f32_tensors, 6);  // 3 MoE layers x (router, expert_bias)

  // Versions that move the router (and everything else) arrive as patches and are written into
  // the engine in place.
  std::mt19937_64 rng(5);
  std::normal_distribution<float> step(0.0f, 2e-4f);
  for (uint64_t v = 1; v <= 3; ++v) {
    for (auto& [name, t] : w.tensors)
      for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] += step(rng);
    Int8State next = quant.quantize(weight_views(w), v);
    Patch p = make_patch(worker_state, next);
    apply_patch(worker_state, decode_patch(encode_patch(p), patch_limits_for(worker_state)));
    worker::apply_update(e, update_of(worker_state, false, &p));
    expect_engine_holds(e, next);
    for (const auto& [name, t] : next.tensors()) {
      if (t.kind != TensorKind::kF32) continue;
      EXPECT_TRUE(same_f32(engine_f32(e, name, t.numel()), w.at(name).as<float>(), t.numel()))
          << name << " at version " << v;
    }
  }
}

// The CPU engine behind the backend seam, recording what the worker's update path names as
// written (engine/backend.h: a device backend uploads exactly those tensors).
class RecordingBackend final : public engine::EngineBackend {
 public:
  explicit RecordingBackend(engine::EngineWeights weights) : cpu_(std::move(weights)) {}
  const char* backend_name() const override { return "recording"; }
  const ModelConfig& config() const override { return cpu_.config(); }
  engine::EngineWeights& host_weights() override { return cpu_.host_weights(); }
  void weights_written(std::span<const std::string> names) override {
    written.assign(names.begin(), names.end());
  }
  std::unique_ptr<engine::SequenceState> new_state(int64_t capacity) const override {
    return cpu_.new_state(capacity);
  }
  engine::PassLogits forward(std::span<const engine::BackendInput> inputs) override {
    return cpu_.forward(inputs);
  }
  std::vector<std::string> written;

 private:
  engine::ModelRunner cpu_;
};

// The worker's real path for patches: the sync hands over the verified patches themselves and
// the engine scatters them into the storage it computes from — the packed VNNI panels where the
// target uses them and the row-major grid (reference backend) — with no tensor copy or repack,
// landing on exactly the sender's state; rescaled groups, bf16 and f32 tensors included.
TEST(PulseWorkerView, PatchesScatterIntoTheEngineInPlace) {
  const ModelConfig config = preset_config("tiny-lfm2moe");
  const std::vector<Int8State> chain = testing::moe_chain(4, 1e-5f);
  worker::testing::MemoryHub hub;
  hub.publish(chain[0], nullptr, true);
  worker::WeightSync sync(hub, std::nullopt);
  ASSERT_TRUE(sync.step(std::chrono::seconds(0)));
  auto first = sync.take_update(worker::UpdateForm::kPatches);
  ASSERT_TRUE(first && first->full && first->patches.empty());
  RecordingBackend fast(worker::engine_weights_from_update(config, *first));
  engine::EngineWeights grid = worker::engine_weights_from_update(config, *first);
  grid.set_backend(engine::Backend::kReference);  // the row-major grid, whatever the target
  // Version 1 alone, then 2 and 3 between two takes (two patches, applied in order; 3 rescales
  // groups).
  for (const std::vector<size_t>& batch : {std::vector<size_t>{1}, std::vector<size_t>{2, 3}}) {
    for (size_t v : batch) hub.publish(chain[v], &chain[v - 1], false);
    ASSERT_TRUE(sync.step(std::chrono::seconds(0)));
    auto update = sync.take_update(worker::UpdateForm::kPatches);
    ASSERT_TRUE(update);
    EXPECT_FALSE(update->full);
    EXPECT_TRUE(update->tensors.empty());
    ASSERT_EQ(update->patches.size(), batch.size());
    size_t groups = 0;
    for (const auto& tp : update->patches.back().tensors) groups += tp.groups.size();
    if (batch.back() == 3) {
      EXPECT_GT(groups, 0u) << "moe_chain rescales groups every 3rd version";
    }
    worker::apply_update(fast, *update);
    worker::apply_update(grid, *update);
    std::set<std::string> touched;
    for (const Patch& p : update->patches)
      for (const auto& tp : p.tensors) touched.insert(tp.name);
    EXPECT_EQ(fast.written, std::vector<std::string>(touched.begin(), touched.end()));
    EXPECT_EQ(worker::touched_tensors(*update), fast.written);
    expect_engine_holds(fast.host_weights(), chain[batch.back()]);
    expect_engine_holds(grid, chain[batch.back()]);
  }
}

}  // namespace
}  // namespace stoa::pulse
