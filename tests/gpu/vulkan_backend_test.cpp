// The Vulkan backend (gpu/vulkan/vulkan_backend.h) computes the CPU engine's bits: the logits of
// every row of a prefill, decode steps, a batch mixing both across sequences, forks and resumed
// turns are the same floats as ModelRunner's on every kernel target this machine runs (the CPU
// engine is target invariant: test_engine_targets), and the decode loop above the seam draws the
// same tokens. Weight writes reach the device exactly when weights_written() names them. On
// whatever Vulkan device the machine has (lavapipe in CI).
#include "gpu/vulkan/vulkan_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/page_aligned.h"
#include "engine/batch_decoder.h"
#include "engine/engine_test_util.h"
#include "engine/model_runner.h"
#include "gpu/vulkan_device.h"
#include "model/tensor_roles.h"
#include "support/error_of.h"

namespace stoa::gpu::vulkan {
namespace {

using engine::BackendInput;
using engine::EngineWeights;
using engine::Logits;
using engine::ModelRunner;
using engine::PassLogits;
using engine::SequenceState;
using engine::WeightFormat;
using engine::testing::random_tokens;
using engine::testing::tiny_model;

class VulkanBackendTest : public VulkanDeviceTest {
 protected:
  // The fixture's device, shared with the backend (which must not close it).
  static std::shared_ptr<Context> shared_device() {
    return std::shared_ptr<Context>(device(), [](Context*) {});
  }
  static std::unique_ptr<VulkanBackend> make(
      const ModelWeights& w, WeightPlacement placement = WeightPlacement::kShareWhereUnified) {
    return std::make_unique<VulkanBackend>(
        shared_device(),
        std::make_unique<EngineWeights>(EngineWeights::from_model(w, WeightFormat::kInt8)),
        placement);
  }
};

// The rows of one pass's logits for input i, as a vector.
std::vector<float> rows_of(const PassLogits& l, size_t i) {
  return {l.rows(i).begin(), l.rows(i).end()};
}

// Index of the first float whose bits differ (-1: none), for a readable failure.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  return -1;
}

class VulkanBackendArch : public VulkanBackendTest,
                          public ::testing::WithParamInterface<const char*> {
 protected:
  void decode_loop_sees_writes(WeightPlacement placement);
};

TEST_P(VulkanBackendArch, PrefillAndDecodeEqualTheCpuEngineBitForBit) {
  const ModelWeights w = tiny_model(GetParam());
  ModelRunner cpu = ModelRunner::from_model(w, WeightFormat::kInt8);
  auto gpu = make(w);
  EXPECT_STREQ(gpu->backend_name(), "vulkan");
  const int64_t V = cpu.config().vocab_size;
  const std::vector<int32_t> prompt = random_tokens(37, V, 1);

  std::unique_ptr<SequenceState> g = gpu->new_state(64), c = cpu.new_state(64);
  const BackendInput gp[] = {{g.get(), prompt, Logits::kAll}};
  const std::vector<float> got = rows_of(gpu->forward(gp), 0);
  const BackendInput cp[] = {{c.get(), prompt, Logits::kAll}};
  const std::vector<float> want = rows_of(cpu.forward(cp), 0);
  ASSERT_EQ(got.size(), static_cast<size_t>(37 * V));
  EXPECT_EQ(first_difference(got, want), -1) << "prefill logits differ";

  // Decode steps, each attending to the cache the prefill wrote.
  for (int32_t step = 0; step < 6; ++step) {
    const int32_t token = (step * 31 + 7) % static_cast<int32_t>(V);
    const BackendInput gs[] = {{g.get(), std::span<const int32_t>(&token, 1), Logits::kLast}};
    const BackendInput cs[] = {{c.get(), std::span<const int32_t>(&token, 1), Logits::kLast}};
    const std::vector<float> gl = rows_of(gpu->forward(gs), 0);
    const std::vector<float> cl = rows_of(cpu.forward(cs), 0);
    EXPECT_EQ(first_difference(gl, cl), -1) << "decode step " << step;
  }
  EXPECT_EQ(g->tokens(), c->tokens());
}

TEST_P(VulkanBackendArch, MixedBatchesForksAndResumedTurnsEqualTheCpuEngine) {
  const ModelWeights w = tiny_model(GetParam(), 3);
  ModelRunner cpu = ModelRunner::from_model(w, WeightFormat::kInt8);
  auto gpu = make(w);
  const int64_t V = cpu.config().vocab_size;
  engine::EngineBackend* backends[2] = {gpu.get(), &cpu};
  // The same script on both backends; every pass's logits compared.
  std::vector<std::vector<float>> logits[2];
  for (int b = 0; b < 2; ++b) {
    engine::EngineBackend& be = *backends[b];
    std::unique_ptr<SequenceState> a = be.new_state(96), s = be.new_state(96);
    const std::vector<int32_t> pa = random_tokens(21, V, 4), ps = random_tokens(5, V, 5);
    const BackendInput first[] = {{a.get(), pa, Logits::kLast}, {s.get(), ps, Logits::kAll}};
    const PassLogits l1 = be.forward(first);
    logits[b].push_back(rows_of(l1, 0));
    logits[b].push_back(rows_of(l1, 1));
    // Forks share the prompt; a decode batch of the forks, the original's resumed turn (a
    // multi-token observation) and a sequence that only advances.
    std::unique_ptr<SequenceState> f1 = a->fork_state(), f2 = a->fork_state();
    const int32_t t1 = 3, t2 = 9;
    const std::vector<int32_t> turn = random_tokens(11, V, 6), quiet = random_tokens(2, V, 7);
    const BackendInput second[] = {{f1.get(), std::span<const int32_t>(&t1, 1), Logits::kLast},
                                   {a.get(), turn, Logits::kAll},
                                   {f2.get(), std::span<const int32_t>(&t2, 1), Logits::kLast},
                                   {s.get(), quiet, Logits::kNone}};
    const PassLogits l2 = be.forward(second);
    for (size_t i = 0; i < 4; ++i) logits[b].push_back(rows_of(l2, i));
    EXPECT_EQ(l2.count(3), 0);  // kNone: advanced, no rows
    // One more decode step of everyone, a batch of four single tokens.
    const int32_t t3 = 1;
    const BackendInput third[] = {{f1.get(), std::span<const int32_t>(&t3, 1), Logits::kLast},
                                  {a.get(), std::span<const int32_t>(&t3, 1), Logits::kLast},
                                  {f2.get(), std::span<const int32_t>(&t3, 1), Logits::kLast},
                                  {s.get(), std::span<const int32_t>(&t3, 1), Logits::kLast}};
    const PassLogits l3 = be.forward(third);
    for (size_t i = 0; i < 4; ++i) logits[b].push_back(rows_of(l3, i));
    EXPECT_EQ(a->length(), 21 + 11 + 1);
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  for (size_t i = 0; i < logits[0].size(); ++i)
    EXPECT_EQ(first_difference(logits[0][i], logits[1][i]), -1) << "logits " << i;
}

// The decode loop (BatchDecoder: groups forked from one prompt, sampling) over the seam.
std::vector<std::vector<int32_t>> decode(engine::EngineBackend& backend, int64_t steps) {
  engine::BatchDecoder dec(backend, 4, 96);
  engine::GenerateOptions o;
  o.max_tokens = steps;
  o.seed = 11;
  const int64_t V = backend.config().vocab_size;
  dec.start_group(random_tokens(9, V, 3), 3, o);
  dec.start(random_tokens(5, V, 4), o);
  std::vector<std::vector<int32_t>> out(4);
  while (dec.active() > 0)
    for (const engine::StepEvent& e : dec.step())
      out[static_cast<size_t>(e.slot)].push_back(e.sampled.token);
  return out;
}

// Mirrored weights (a discrete GPU's way) see a write when weights_written() names it; weights
// shared with the host (unified memory) see it at once, and naming it changes nothing.
TEST_P(VulkanBackendArch, TheDecodeLoopDrawsTheCpuTokensAndSeesWritesWhenNamed) {
  for (const WeightPlacement placement :
       {WeightPlacement::kMirror, WeightPlacement::kShareWhereUnified}) {
    SCOPED_TRACE(placement == WeightPlacement::kMirror ? "mirrored" : "shared where unified");
    decode_loop_sees_writes(placement);
  }
}

// A discrete GPU's way: the mirrored weights in memory the host cannot map, written through
// staging copies (at build and at every named write). lavapipe has no such memory, so its
// device buffers are left unmapped on purpose: the same copies run, in pieces of 1000 bytes (a
// few rows each, and pieces that split a row's scales), so every matrix takes many.
TEST_P(VulkanBackendArch, WeightsInDeviceOnlyMemoryAreStagedBitForBit) {
  struct Staged {
    Staged() { device()->force_staged_device_buffers(true, 1000); }
    ~Staged() { device()->force_staged_device_buffers(false); }
  } staged;
  EXPECT_TRUE(
      make(tiny_model(GetParam(), 5), WeightPlacement::kMirror)->weights_in_device_memory());
  SCOPED_TRACE("mirrored in device-only memory");
  decode_loop_sees_writes(WeightPlacement::kMirror);
}

void VulkanBackendArch::decode_loop_sees_writes(WeightPlacement placement) {
  const ModelWeights w = tiny_model(GetParam(), 5);
  ModelRunner cpu = ModelRunner::from_model(w, WeightFormat::kInt8);
  auto gpu = make(w, placement);
  EXPECT_EQ(gpu->shares_host_weights(), placement == WeightPlacement::kShareWhereUnified &&
                                            device()->info().imports_host_memory);
  if (gpu->shares_host_weights()) {
    EXPECT_FALSE(gpu->weights_in_device_memory());
  }
  EXPECT_EQ(decode(*gpu, 10), decode(cpu, 10));

  // A PULSE-like write of one tensor's int8 values in both host copies.
  // Layer 0 has a dense feed-forward in every tiny model (tiny-lfm2moe: its one dense layer).
  const std::string name = tensor_name(w.config, TensorRole::kFfnDown, 0);
  auto write = [&](EngineWeights& weights) {
    Int8Matrix m = weights.linear(name).int8();
    for (size_t i = 0; i < m.values.size(); i += 5) m.values[i] = static_cast<int8_t>(-m.values[i]);
    weights.set_int8_values(name, m.values);
  };
  write(cpu.host_weights());
  write(gpu->host_weights());
  if (gpu->shares_host_weights()) {
    EXPECT_EQ(decode(*gpu, 10), decode(cpu, 10)) << "the device reads the host's pages";
  } else {
    EXPECT_NE(decode(*gpu, 10), decode(cpu, 10)) << "the device saw a write nobody named";
  }
  const std::string names[] = {name};
  gpu->weights_written(names);
  EXPECT_EQ(decode(*gpu, 10), decode(cpu, 10));
  const std::string unknown[] = {"model.layers.1.mlp.nothing.weight"};
  EXPECT_EQ(test::error_of([&] { gpu->weights_written(unknown); }).kind(),
            ErrorKind::kInvalidArgument);
}

// Issue 54 item 3: on a unified-memory device that imports host memory (lavapipe in CI) the
// int8 weights exist once: the device's buffers are the host grid's own pages, its allocations
// for weights only the f32 vectors, and a PULSE write in place (the worker's patch path) is the
// device's at the next pass, bit for bit the CPU engine's. A device without imports mirrors.
TEST_P(VulkanBackendArch, OnUnifiedMemoryTheWeightsExistOnce) {
  const ModelWeights w = tiny_model(GetParam(), 8);
  auto shared = make(w), mirrored = make(w, WeightPlacement::kMirror);
  const EngineWeights& host = shared->host_weights();
  size_t grid_bytes = 0, vector_bytes = 0, device_linears = 0;
  for (const auto& [name, linear] : host.linears()) {
    const bool on_device =
        linear.is_int8() && (&linear != &host.embedding() || &linear == &host.lm_head());
    if (!on_device) continue;
    grid_bytes += linear.int8_grid_nbytes();
    ++device_linears;
  }
  for (const auto& [name, t] : host.vectors())
    vector_bytes += std::max<size_t>(4, static_cast<size_t>(t.numel()) * sizeof(float));
  EXPECT_FALSE(mirrored->shares_host_weights());
  EXPECT_EQ(mirrored->imported_weight_bytes(), 0u);
  EXPECT_GE(mirrored->allocated_weight_bytes(), grid_bytes + vector_bytes);
  if (!device()->info().imports_host_memory) {
    EXPECT_FALSE(shared->shares_host_weights()) << "no imports here: mirrored";
    return;
  }
  ASSERT_TRUE(shared->shares_host_weights());
  EXPECT_EQ(shared->allocated_weight_bytes(), vector_bytes) << "only the f32 vectors are copies";
  // Imported: the grids themselves, each rounded up to whole pages (values and scales).
  EXPECT_GE(shared->imported_weight_bytes(), grid_bytes);
  EXPECT_LE(shared->imported_weight_bytes(), grid_bytes + 2 * device_linears * kHostPageAlignment);
  const std::string name = tensor_name(w.config, TensorRole::kFfnDown, 0);
  const kernels::Int8Weights grid = host.linear(name).grid_view();
  ASSERT_NE(grid.values, nullptr) << "a shared Linear holds its grid";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(grid.values) % kHostPageAlignment, 0u);

  // A PULSE patch's points, scattered in place in both engines; named, as the worker does.
  ModelRunner cpu = ModelRunner::from_model(w, WeightFormat::kInt8);
  std::vector<uint64_t> positions;
  std::vector<int8_t> values;
  for (uint64_t p = 3; p < static_cast<uint64_t>(grid.rows * grid.cols); p += 7) {
    positions.push_back(p);
    values.push_back(static_cast<int8_t>(static_cast<int>(p % 255) - 127));
  }
  cpu.host_weights().int8_linear_mutable(name).exchange_int8_values(positions, values.data(),
                                                                    nullptr);
  shared->host_weights().int8_linear_mutable(name).exchange_int8_values(positions, values.data(),
                                                                        nullptr);
  EXPECT_EQ(host.linear(name).grid_view().values, grid.values) << "written in place";
  EXPECT_EQ(decode(*shared, 10), decode(cpu, 10)) << "the device reads the written pages";
  const std::string names[] = {name};
  shared->weights_written(names);  // nothing to copy; the pass below is the same
  const int64_t V = cpu.config().vocab_size;
  const std::vector<int32_t> prompt = random_tokens(13, V, 2);
  std::unique_ptr<SequenceState> g = shared->new_state(16), c = cpu.new_state(16);
  const BackendInput gp[] = {{g.get(), prompt, Logits::kAll}};
  const BackendInput cp[] = {{c.get(), prompt, Logits::kAll}};
  const std::vector<float> got = rows_of(shared->forward(gp), 0);
  EXPECT_EQ(first_difference(got, rows_of(cpu.forward(cp), 0)), -1) << "after the write";
}

TEST_F(VulkanBackendTest, RefusesWhatItCannotComputeAndBadPassesChangeNothing) {
  // f32 weights (the oracle's form; a worker holds int8) are the CPU engine's to compute.
  const Error f32 = test::error_of([] {
    VulkanBackend(shared_device(), std::make_unique<EngineWeights>(EngineWeights::from_model(
                                       tiny_model("tiny-qwen3"), WeightFormat::kF32)));
  });
  EXPECT_EQ(f32.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(f32.what()).find("int8"), std::string::npos) << f32.what();
  // A backend that cannot be built leaves the weights with the caller, who computes on the CPU.
  auto kept = std::make_unique<EngineWeights>(
      EngineWeights::from_model(tiny_model("tiny-qwen3"), WeightFormat::kF32));
  const EngineWeights* held = kept.get();
  EXPECT_EQ(test::error_of([&] { VulkanBackend(shared_device(), std::move(kept)); }).kind(),
            ErrorKind::kUnsupported);
  ASSERT_EQ(kept.get(), held);
  ModelRunner after(std::move(kept));
  EXPECT_EQ(after.config().vocab_size, held->config().vocab_size);

  const ModelWeights w = tiny_model("tiny-qwen3");
  ModelRunner cpu = ModelRunner::from_model(w, WeightFormat::kInt8);
  auto gpu = make(w);
  const int64_t V = cpu.config().vocab_size;
  std::unique_ptr<SequenceState> mine = gpu->new_state(8), foreign = cpu.new_state(8);
  const std::vector<int32_t> toks = random_tokens(4, V, 9);
  const BackendInput mixed[] = {{mine.get(), toks, Logits::kLast},
                                {foreign.get(), toks, Logits::kLast}};
  EXPECT_EQ(test::error_of([&] { gpu->forward(mixed); }).kind(), ErrorKind::kInvalidArgument);
  const std::vector<int32_t> too_many = random_tokens(9, V, 9);
  const BackendInput over[] = {{mine.get(), too_many, Logits::kLast}};
  EXPECT_EQ(test::error_of([&] { gpu->forward(over); }).kind(), ErrorKind::kInvalidArgument);
  const int32_t bad = static_cast<int32_t>(V);
  const BackendInput out_of_vocab[] = {{mine.get(), std::span<const int32_t>(&bad, 1)}};
  EXPECT_EQ(test::error_of([&] { gpu->forward(out_of_vocab); }).kind(),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(mine->length(), 0);
}

INSTANTIATE_TEST_SUITE_P(Architectures, VulkanBackendArch,
                         ::testing::Values("tiny-qwen3", "tiny-lfm2", "tiny-lfm2moe"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           std::string name = param.param;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace stoa::gpu::vulkan
