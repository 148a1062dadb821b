// The trainer's per-tensor make (VersionMaker) and the streaming anchor writer against the
// whole-state reference: the same patch and the same anchor bytes, on tiny-lfm2moe so that all
// three carriers (int8 grid with re-scaled groups, bf16, f32 router) occur.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include "core/file_bytes.h"
#include "pulse/anchor_stream.h"
#include "pulse/anchor_writer.h"
#include "pulse/blob_store.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse/version_maker.h"
#include "pulse_test_util.h"

namespace stoa::pulse {
namespace {

using testing::same_bytes;

struct TwoVersions {
  ModelWeights masters;  // at version 1
  Int8State v0, v1;
};

// Version 0 quantised on a fresh grid; then every weight moves by N(0, 1e-4) and the first group
// of every matrix triples (re-scaled groups), and version 1 is quantised on the frozen grid.
TwoVersions two_versions() {
  TwoVersions out;
  out.masters = random_weights(preset_config("tiny-lfm2moe"), 5);
  Int8Quantizer quant;
  out.v0 = int8_view_of(out.masters, 0, &quant);
  std::mt19937_64 rng(9);
  std::normal_distribution<float> step(0.0f, 1e-4f);
  for (auto& [name, t] : out.masters.tensors) {
    float* x = t.as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) x[i] += step(rng);
    if (t.rank() == 2)
      for (int64_t i = 0; i < 32 && i < t.numel(); ++i) x[i] *= 3.0f;
  }
  out.v1 = quant.quantize(weight_views(out.masters), 1);
  return out;
}

TEST(VersionMaker, SamePatchAsTheWholeStateDiffAndTheViewLandsOnTheNewVersion) {
  TwoVersions tv = two_versions();
  const Patch want = make_patch(tv.v0, tv.v1);
  Int8State view = tv.v0;  // the trainer's one view, updated in place tensor by tensor
  VersionMaker maker(0, 1, tv.v0.config_hash());
  {
    StateEditor edit(view);
    // Any order: reverse name order here.
    for (auto it = tv.v0.tensors().rbegin(); it != tv.v0.tensors().rend(); ++it) {
      const std::string& name = it->first;
      maker.tensor(name, edit.tensor(name), tv.v0.tensor_hash(name),
                   tv.masters.tensors.at(name).as<const float>());
      edit.rehash(name);
    }
  }
  view.set_version(1);
  EXPECT_TRUE(same_bytes(view, tv.v1));
  const Patch got = maker.finish();
  EXPECT_GT(maker.stats().rescaled_groups, 0);
  EXPECT_GT(maker.stats().changed, 0);
  EXPECT_EQ(static_cast<uint64_t>(maker.stats().changed), want.values_written());
  EXPECT_EQ(encode_patch(got), encode_patch(want));
  Int8State applied = tv.v0;
  apply_patch(applied, decode_patch(encode_patch(got)));
  EXPECT_TRUE(same_bytes(applied, tv.v1));
}

TEST(VersionMaker, NonFiniteMasterLeavesTheViewUntouched) {
  TwoVersions tv = two_versions();
  Int8State view = tv.v0;
  VersionMaker maker(0, 1, tv.v0.config_hash());
  StateEditor edit(view);
  const std::string name = "model.embed_tokens.weight";
  Tensor bad = tv.masters.tensors.at(name).clone();
  bad.as<float>()[bad.numel() - 1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(maker.tensor(name, edit.tensor(name), tv.v0.tensor_hash(name), bad.as<float>()),
               Error);
  EXPECT_TRUE(same_bytes(view, tv.v0));
}

TEST(AnchorFileWriter, SameBytesAsEncodeAnchorAndStreamsBack) {
  TwoVersions tv = two_versions();
  const auto dir = std::filesystem::temp_directory_path() / "stoa_anchor_writer_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "anchor").string();
  std::vector<TensorLayout> layouts;
  for (const auto& [name, t] : tv.v1.tensors()) layouts.push_back({name, t.kind, t.shape});
  AnchorFileWriter writer(path, 1, tv.v1.config_hash(), layouts);
  for (const auto& [name, t] : tv.v1.tensors()) writer.add(name, t);
  const WrittenAnchor written = writer.finish();
  const std::vector<uint8_t> want = encode_anchor(tv.v1);
  EXPECT_EQ(read_file(path), want);
  EXPECT_EQ(written.bytes, want.size());
  EXPECT_EQ(written.blob_hash, hash_bytes(want.data(), want.size()));
  EXPECT_EQ(written.header.state_hash, tv.v1.state_hash());
  EXPECT_TRUE(same_bytes(decode_anchor_file(path, &written.blob_hash), tv.v1));
  std::filesystem::remove_all(dir);
}

TEST(AnchorFileWriter, OutOfOrderTensorIsRefusedAndNoFileIsLeft) {
  TwoVersions tv = two_versions();
  const auto path = std::filesystem::temp_directory_path() / "stoa_anchor_writer_order";
  {
    std::vector<TensorLayout> layouts;
    for (const auto& [name, t] : tv.v0.tensors()) layouts.push_back({name, t.kind, t.shape});
    AnchorFileWriter writer(path.string(), 0, tv.v0.config_hash(), layouts);
    auto last = tv.v0.tensors().rbegin();
    EXPECT_THROW(writer.add(last->first, last->second), Error);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace stoa::pulse
