// PULSE follows the shared precision plan (model/precision_plan.h): on an LFM2-MoE model the
// router and expert_bias travel as f32 bits, so a worker routes tokens exactly as the trainer's
// f32 masters do; everything round-trips bit for bit through patches, composed patches and
// anchors; a corrupt f32 section is refused and leaves the weights untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "model/precision_plan.h"
#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse_test_util.h"
#include "support/error_of.h"

namespace stoa::pulse {
namespace {

using testing::moe_chain;
using testing::same_bytes;

bool is_f32_by_plan(const std::string& name) {
  return is_moe_router(name) || name.ends_with(".expert_bias");
}

TEST(PulsePrecision, KindsFollowThePrecisionPlan) {
  ModelWeights w = random_weights(preset_config("tiny-lfm2moe"), 3);
  Int8Quantizer quant;
  Int8State s = int8_view_of(w, 0, &quant);
  int routers = 0, biases = 0;
  for (const auto& [name, t] : s.tensors()) {
    const Tensor& master = w.at(name);
    EXPECT_EQ(t.kind, tensor_kind_for(name, master.shape())) << name;
    switch (carrier_for(name, master.shape())) {
      case Carrier::kInt8Grid:
        EXPECT_EQ(t.kind, TensorKind::kInt8) << name;
        break;
      case Carrier::kBf16:
        EXPECT_EQ(t.kind, TensorKind::kBf16) << name;
        break;
      case Carrier::kF32:
        EXPECT_EQ(t.kind, TensorKind::kF32) << name;
        // The master's bits exactly: nothing is rounded on the way to the worker.
        ASSERT_EQ(t.f32.size(), static_cast<size_t>(master.numel())) << name;
        EXPECT_EQ(std::memcmp(t.f32.data(), master.as<float>(), t.f32.size() * 4), 0) << name;
        break;
    }
    EXPECT_EQ(t.kind == TensorKind::kF32, is_f32_by_plan(name)) << name;
    routers += is_moe_router(name);
    biases += name.ends_with(".expert_bias");
  }
  EXPECT_EQ(routers, 3);  // tiny-lfm2moe: 3 MoE layers
  EXPECT_EQ(biases, 3);
}

TEST(PulsePrecision, FingerprintCoversTensorKinds) {
  Int8State s = moe_chain(1)[0];
  // The same names and shapes with the router carried as bf16 (what format version 1 did with
  // expert_bias) is another model as far as PULSE is concerned.
  Int8State other;
  other.set_config_hash(s.config_hash());
  for (const auto& [name, t] : s.tensors()) {
    if (is_moe_router(name)) {
      std::vector<uint16_t> bf16(t.f32.size());
      for (size_t i = 0; i < bf16.size(); ++i) {
        float f;
        std::memcpy(&f, &t.f32[i], 4);
        bf16[i] = f32_to_bf16(f);
      }
      other.add_bf16(name, t.shape, std::move(bf16));
    } else {
      other.add(name, t);
    }
  }
  EXPECT_NE(other.fingerprint(), s.fingerprint());
  Int8State moved = s;
  moved.set_version(1);
  EXPECT_THROW(apply_patch(other, make_patch(s, moved)), Error);
}

TEST(PulsePrecision, RouterChangesRoundTripBitExactly) {
  auto chain = moe_chain(7);
  Int8State worker = decode_anchor(encode_anchor(chain[0]));
  EXPECT_TRUE(same_bytes(worker, chain[0]));
  for (size_t v = 1; v < chain.size(); ++v) {
    Patch p = make_patch(chain[v - 1], chain[v]);
    size_t f32_points = 0, f32_tensors = 0, groups = 0;
    for (const auto& t : p.tensors) {
      if (t.kind == TensorKind::kF32) {
        ++f32_tensors;
        f32_points += t.points();
        EXPECT_EQ(t.f32.size(), t.points());
      }
      groups += t.groups.size();
    }
    EXPECT_EQ(f32_tensors, 6u) << "every router and expert_bias changed at version " << v;
    EXPECT_GT(f32_points, 0u);
    if (v % 3 == 0) {
      EXPECT_GT(groups, 0u) << v;
    }
    for (auto coding : {PositionCoding::kVarint, PositionCoding::kFixed, PositionCoding::kShuffled,
                        PositionCoding::kRowCol}) {
      Int8State copy = worker;
      apply_patch(copy,
                  decode_patch(encode_patch(p, EncodeOptions{coding, 1}), patch_limits_for(copy)));
      EXPECT_TRUE(same_bytes(copy, chain[v])) << v << " " << position_coding_name(coding);
    }
    apply_patch(worker, decode_patch(encode_patch(p), patch_limits_for(worker)));
    ASSERT_TRUE(same_bytes(worker, chain[v])) << v;
    EXPECT_TRUE(worker.verify_cached_hashes());
    Int8State anchored = decode_anchor(encode_anchor(chain[v]));
    EXPECT_TRUE(same_bytes(anchored, chain[v])) << v;
  }
}

TEST(PulsePrecision, ComposedPatchesCarryTheLatestF32Values) {
  auto chain = moe_chain(8);
  std::vector<Patch> patches;
  for (size_t v = 1; v < chain.size(); ++v) patches.push_back(make_patch(chain[v - 1], chain[v]));
  for (size_t from = 0; from < patches.size(); ++from) {
    for (size_t to = from + 1; to <= patches.size(); ++to) {
      std::vector<Patch> window(patches.begin() + static_cast<long>(from),
                                patches.begin() + static_cast<long>(to));
      Patch c = compose_chain(window);
      Int8State s = chain[from];
      apply_patch(s, decode_patch(encode_patch(c)));
      ASSERT_TRUE(same_bytes(s, chain[to])) << from << "->" << to;
    }
  }
  // The composed f32 section equals the direct diff's (later value wins, nothing stale).
  Patch composed = compose_chain(patches);
  Patch direct = make_patch(chain.front(), chain.back());
  for (const auto& t : composed.tensors) {
    if (t.kind != TensorKind::kF32) continue;
    auto d = std::find_if(direct.tensors.begin(), direct.tensors.end(),
                          [&](const TensorPatch& x) { return x.name == t.name; });
    ASSERT_NE(d, direct.tensors.end()) << t.name;
    // Positions that changed and changed back appear in the composition only; the values at the
    // direct diff's positions agree.
    for (size_t i = 0; i < d->positions.size(); ++i) {
      auto it = std::lower_bound(t.positions.begin(), t.positions.end(), d->positions[i]);
      ASSERT_TRUE(it != t.positions.end() && *it == d->positions[i]) << t.name;
      EXPECT_EQ(t.f32[static_cast<size_t>(it - t.positions.begin())], d->f32[i]) << t.name;
    }
  }
}

// The byte offset of `needle` inside `hay` (the first occurrence), or npos.
size_t find_bytes(const std::vector<uint8_t>& hay, const void* needle, size_t n) {
  auto it = std::search(hay.begin(), hay.end(), static_cast<const uint8_t*>(needle),
                        static_cast<const uint8_t*>(needle) + n);
  return it == hay.end() ? std::string::npos : static_cast<size_t>(it - hay.begin());
}

TEST(PulsePrecision, CorruptF32SectionIsRefused) {
  auto chain = moe_chain(2);
  Patch p = make_patch(chain[0], chain[1]);
  auto router = std::find_if(p.tensors.begin(), p.tensors.end(),
                             [](const TensorPatch& t) { return is_moe_router(t.name); });
  ASSERT_NE(router, p.tensors.end());
  ASSERT_GE(router->f32.size(), 4u);

  // In memory: one flipped bit in one router value -> the tensor hash catches it, nothing moves.
  {
    Patch bad = p;
    auto& t = *std::find_if(bad.tensors.begin(), bad.tensors.end(),
                            [&](const TensorPatch& x) { return x.name == router->name; });
    t.f32[1] ^= 1u;  // the lowest mantissa bit: a bf16 or int8 carrier could not even see it
    Int8State s = chain[0];
    const Error corrupt_router =
        stoa::test::error_of([&] { apply_patch(s, bad); }, "a corrupt router value was applied");
    EXPECT_EQ(corrupt_router.kind(), ErrorKind::kIntegrity);
    EXPECT_NE(std::string(corrupt_router.what()).find(router->name), std::string::npos)
        << corrupt_router.what();
    EXPECT_TRUE(same_bytes(s, chain[0]));
    EXPECT_EQ(s.state_hash(), chain[0].state_hash());
  }

  // On the wire, behind a valid envelope (the payload re-sealed so its checksum holds).
  std::vector<uint8_t> blob = encode_patch(p);
  BlobHeader h;
  std::vector<uint8_t> raw = open_blob(blob, &h);
  size_t at = find_bytes(raw, router->f32.data(), router->f32.size() * 4);
  ASSERT_NE(at, std::string::npos);
  {  // a changed value decodes but does not verify
    std::vector<uint8_t> r = raw;
    r[at + 5] ^= 0x10;
    Patch decoded = decode_patch(seal_blob(h, r, 1));
    Int8State s = chain[0];
    EXPECT_THROW(apply_patch(s, decoded), Error);
    EXPECT_TRUE(same_bytes(s, chain[0]));
  }
  {  // the section cut short (payload ends inside the router's values)
    std::vector<uint8_t> r(raw.begin(), raw.begin() + static_cast<long>(at + 6));
    const Error truncated = stoa::test::error_of([&] { decode_patch(seal_blob(h, r, 1)); },
                                                 "a truncated f32 section decoded");
    EXPECT_EQ(truncated.kind(), ErrorKind::kBadFormat);
    EXPECT_NE(std::string(truncated.what()).find("f32 values"), std::string::npos)
        << truncated.what();
  }
  {  // an unknown kind byte in the router's section head
    size_t name_at = find_bytes(raw, router->name.data(), router->name.size());
    ASSERT_NE(name_at, std::string::npos);
    std::vector<uint8_t> r = raw;
    ASSERT_EQ(r[name_at + router->name.size()], 2);  // the kind byte: f32
    r[name_at + router->name.size()] = 3;
    EXPECT_THROW(decode_patch(seal_blob(h, r, 1)), Error);
    // ... and a router relabelled bf16 (its values then misparse) never reaches the weights.
    r[name_at + router->name.size()] = 1;
    Int8State s = chain[0];
    EXPECT_THROW(apply_patch(s, decode_patch(seal_blob(h, r, 1))), Error);
    EXPECT_TRUE(same_bytes(s, chain[0]));
  }
  // An anchor with a corrupt f32 value is refused naming the tensor.
  {
    std::vector<uint8_t> anchor = encode_anchor(chain[1]);
    BlobHeader ah;
    std::vector<uint8_t> ar = open_blob(anchor, &ah);
    const StateTensor& t = chain[1].at(router->name);
    size_t a = find_bytes(ar, t.f32.data(), t.f32.size() * 4);
    ASSERT_NE(a, std::string::npos);
    ar[a + 2] ^= 0x01;
    const Error corrupt_anchor = stoa::test::error_of([&] { decode_anchor(seal_blob(ah, ar, 1)); },
                                                      "a corrupt anchor decoded");
    EXPECT_EQ(corrupt_anchor.kind(), ErrorKind::kIntegrity);
    EXPECT_NE(std::string(corrupt_anchor.what()).find(router->name), std::string::npos)
        << corrupt_anchor.what();
  }
}

}  // namespace
}  // namespace stoa::pulse
