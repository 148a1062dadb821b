#include <gtest/gtest.h>

#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse_test_util.h"
#include "support/error_of.h"

namespace stoa::pulse {
namespace {

using testing::same_bytes;
using testing::sim_chain;

size_t count_groups(const Patch& p) {
  size_t n = 0;
  for (const auto& t : p.tensors) n += t.groups.size();
  return n;
}

TEST(PulsePatch, ApplyReproducesTheTargetExactly) {
  auto chain = sim_chain(3, 1e-5f);
  Patch p = make_patch(chain[0], chain[1]);
  EXPECT_EQ(p.from_version, 0u);
  EXPECT_EQ(p.to_version, 1u);
  EXPECT_GT(p.values_written(), 0u);
  EXPECT_LT(p.values_written(), static_cast<uint64_t>(chain[0].numel() / 10));
  for (const auto& t : p.tensors)
    for (size_t i = 0; i < t.positions.size(); ++i) {
      const StateTensor& before = chain[0].at(t.name);
      if (t.kind == TensorKind::kInt8) {
        EXPECT_NE(before.q.values[t.positions[i]], t.i8[i]);  // only real changes travel
      }
    }
  Int8State r = chain[0];
  apply_patch(r, p);
  EXPECT_TRUE(same_bytes(r, chain[1]));
  EXPECT_EQ(r.state_hash(), chain[1].state_hash());
  EXPECT_TRUE(r.verify_cached_hashes());
}

TEST(PulsePatch, RescaledGroupsTravelWhole) {
  auto chain = sim_chain(2, 3e-3f);  // a huge step: many groups must be re-scaled
  Patch p = make_patch(chain[0], chain[1]);
  ASSERT_GT(count_groups(p), 0u);
  for (const auto& t : p.tensors) {
    for (uint64_t pos : t.positions)
      EXPECT_FALSE(std::binary_search(t.groups.begin(), t.groups.end(), pos / 32));
  }
  Int8State r = chain[0];
  apply_patch(r, p);
  EXPECT_TRUE(same_bytes(r, chain[1]));
}

TEST(PulsePatch, RefusesWrongVersionAndWrongModel) {
  auto chain = sim_chain(3, 1e-5f);
  Patch p12 = make_patch(chain[1], chain[2]);
  Int8State r = chain[0];
  const Error wrong_version = stoa::test::error_of([&] { apply_patch(r, p12); },
                                                   "applied a patch for version 1 to version 0");
  EXPECT_EQ(wrong_version.kind(), ErrorKind::kIntegrity);
  EXPECT_NE(std::string(wrong_version.what()).find("does not apply to version 0"),
            std::string::npos);
  Patch p01 = make_patch(chain[0], chain[1]);
  p01.fingerprint.low ^= 1;
  EXPECT_THROW(apply_patch(r, p01), Error);
  EXPECT_TRUE(same_bytes(r, chain[0]));
}

// Planted corruption that passes every envelope check (the envelope is recomputed): the applier
// must notice through the tensor hashes, restore every byte and report the tensor.
TEST(PulsePatch, PlantedCorruptionIsRefusedAndTheStateIsUntouched) {
  auto chain = sim_chain(2, 3e-3f);
  Patch good = make_patch(chain[0], chain[1]);
  ASSERT_GE(good.tensors.size(), 3u);
  auto expect_refused = [&](const Patch& bad, const char* what) {
    SCOPED_TRACE(what);
    // Through the wire format: a re-sealed blob decodes fine...
    Patch decoded = decode_patch(encode_patch(bad));
    Int8State r = chain[0];
    Hash128 before = r.state_hash();
    const Error corrupt =
        stoa::test::error_of([&] { apply_patch(r, decoded); }, "corrupt patch applied");
    EXPECT_EQ(corrupt.kind(), ErrorKind::kIntegrity) << corrupt.what();
    // ...and the state is exactly as it was: bytes, cached hashes and version.
    EXPECT_TRUE(same_bytes(r, chain[0]));
    EXPECT_EQ(r.state_hash(), before);
    EXPECT_TRUE(r.verify_cached_hashes());
    EXPECT_EQ(r.version(), 0u);
  };
  // A wrong value in the LAST tensor: the earlier tensors were already scattered and must be
  // rolled back.
  {
    Patch bad = good;
    auto& t = bad.tensors.back();
    ASSERT_FALSE(t.positions.empty());
    if (t.kind == TensorKind::kInt8)
      t.i8[0] = static_cast<int8_t>(t.i8[0] == 5 ? 6 : 5);
    else
      t.bf16[0] ^= 1;
    expect_refused(bad, "wrong value in the last tensor");
  }
  {
    Patch bad = good;
    for (auto& t : bad.tensors)
      if (t.kind == TensorKind::kInt8 && !t.groups.empty()) {
        t.group_scales[0] ^= 1;
        break;
      }
    expect_refused(bad, "wrong rescaled-group scale");
  }
  {
    Patch bad = good;
    auto& t = bad.tensors[1];
    t.positions.pop_back();  // a dropped change
    (t.kind == TensorKind::kInt8) ? t.i8.pop_back() : t.bf16.pop_back();
    expect_refused(bad, "missing position");
  }
  {
    Patch bad = good;
    bad.result_state_hash.high ^= 1;
    expect_refused(bad, "wrong whole-state hash");
  }
  {
    Patch bad = good;
    bad.tensors.erase(bad.tensors.begin() + 1);  // a whole tensor missing: caught by state hash
    expect_refused(bad, "missing tensor");
  }
}

TEST(PulsePatch, StructurallyInvalidPatchesAreRefusedBeforeAnyWrite) {
  auto chain = sim_chain(2, 1e-4f);
  Patch good = make_patch(chain[0], chain[1]);
  auto expect_bad = [&](const Patch& bad) {
    Int8State r = chain[0];
    EXPECT_THROW(apply_patch(r, bad), Error);
    EXPECT_TRUE(same_bytes(r, chain[0]));
  };
  Patch a = good;
  a.tensors[0].positions.back() = static_cast<uint64_t>(chain[0].at(a.tensors[0].name).numel());
  expect_bad(a);
  Patch b = good;
  b.tensors[0].name = "no.such.tensor";
  expect_bad(b);
  Patch c = good;
  c.tensors[0].shape = {1, 1};
  expect_bad(c);
  Patch d = good;
  std::swap(d.tensors[0], d.tensors[1]);
  expect_bad(d);
}

TEST(PulsePatch, ComposeEqualsSequentialApplication) {
  // Large steps so that groups are re-scaled in one patch and hit by points in the next.
  auto chain = sim_chain(6, 2e-3f);
  std::vector<Patch> p;
  for (size_t i = 0; i + 1 < chain.size(); ++i) p.push_back(make_patch(chain[i], chain[i + 1]));
  ASSERT_GT(count_groups(p[0]), 0u);
  Patch all = p[0];
  for (size_t i = 1; i < p.size(); ++i) {
    all = compose_patches(all, p[i]);
    Int8State r = chain[0];
    apply_patch(r, all);
    EXPECT_TRUE(same_bytes(r, chain[i + 1])) << "composed 0->" << i + 1;
  }
  // Associativity and a composed patch from the middle.
  Patch right = compose_patches(p[1], compose_patches(p[2], p[3]));
  Int8State r = chain[1];
  apply_patch(r, right);
  EXPECT_TRUE(same_bytes(r, chain[4]));
  EXPECT_THROW(compose_patches(p[0], p[2]), Error);  // not consecutive
  Int8State whole = chain[0];
  apply_patch(whole, compose_chain(p));
  EXPECT_TRUE(same_bytes(whole, chain.back()));
  EXPECT_THROW(compose_chain({}), Error);
}

TEST(PulsePatch, ComposeHandlesGroupsAgainstPoints) {
  // Hand-made: a one-tensor state; patch A rescales group 0 and sets a point in group 1; patch B
  // sets points inside group 0 and rescales group 1.
  auto chain = sim_chain(1, 0.0f, 3, SimLayout{64, 64, 64, 1, 2, 2, 32});
  Int8State s0 = chain[0];
  const std::string name = "model.layers.0.mlp.up_proj.weight";
  auto edit = [&](Int8State s, auto fn, uint64_t version) {
    StateEditor ed(s);
    fn(ed.tensor(name));
    ed.rehash(name);
    s.set_version(version);
    return s;
  };
  Int8State s1 = edit(
      s0,
      [](StateTensor& t) {
        t.q.scales[0] ^= 0x10;
        for (int i = 0; i < 32; ++i) t.q.values[i] = static_cast<int8_t>(i - 7);
        t.q.values[40] = 99;
      },
      1);
  Int8State s2 = edit(
      s1,
      [](StateTensor& t) {
        t.q.values[3] = -100;
        t.q.values[31] = 100;
        t.q.scales[1] ^= 0x20;
        for (int i = 32; i < 64; ++i) t.q.values[i] = static_cast<int8_t>(64 - i);
        t.q.values[64] = 1;
      },
      2);
  Patch a = make_patch(s0, s1);
  Patch b = make_patch(s1, s2);
  ASSERT_EQ(a.tensors.size(), 1u);
  EXPECT_EQ(a.tensors[0].groups, std::vector<uint64_t>{0});
  EXPECT_EQ(b.tensors[0].groups, std::vector<uint64_t>{1});
  Patch ab = compose_patches(a, b);
  EXPECT_EQ(ab.tensors[0].groups, (std::vector<uint64_t>{0, 1}));
  Int8State r = s0;
  apply_patch(r, ab);
  EXPECT_TRUE(same_bytes(r, s2));
}

}  // namespace
}  // namespace stoa::pulse
