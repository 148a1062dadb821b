// Deterministic mutation fuzzing of everything a worker feeds with untrusted bytes: the envelope,
// the patch and anchor decoders and the applier. Every input must end in a valid result or a
// clean stoa::Error — never a crash, a foreign exception, undefined behaviour (CI runs this under
// ASan+UBSan) or a half-applied state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse_test_util.h"

namespace stoa::pulse {
namespace {

using testing::same_bytes;

const DecodeLimits kLimits{uint64_t{1} << 24};  // no mutated size field may allocate beyond this

struct Outcome {
  int valid = 0;
  int refused = 0;
};

class Fuzzer {
 public:
  Fuzzer() {
    // Seeds from two models: a Qwen3-shaped simulation (int8 + bf16) and tiny-lfm2moe, whose
    // router and expert_bias sections carry f32 values (format version 2's new kind).
    AdamSimulator sim(SimLayout{64, 64, 64, 1, 2, 2, 32}, 99);
    Int8Quantizer quant;
    bases_[0] = quant.quantize(sim.views(), 0);
    sim.step(3e-3f);  // a large step: points, re-scaled groups and bf16 changes all present
    add_seeds(0, quant.quantize(sim.views(), 1));
    auto moe = testing::moe_chain(4, 1e-6f);  // sparse; v3 re-scales groups; every f32 value moves
    bases_[1] = moe[0];
    add_seeds(1, moe[3]);
  }

  void add_seeds(int base, const Int8State& next) {
    Patch p = make_patch(bases_[base], next);
    size_t groups = 0, f32 = 0;
    for (const auto& t : p.tensors) {
      groups += t.groups.size();
      f32 += t.f32.size();
    }
    EXPECT_GT(groups, 0u);
    if (base == 1) {
      EXPECT_GT(f32, 0u);
    }
    for (auto coding : {PositionCoding::kVarint, PositionCoding::kFixed, PositionCoding::kShuffled,
                        PositionCoding::kRowCol})
      seeds_.push_back({encode_patch(p, EncodeOptions{coding, 1}), base});
    seeds_.push_back({encode_anchor(next), base});
  }

  // Runs one input through the decoders (and the applier, for a patch, on the seed's base).
  void feed(const std::vector<uint8_t>& blob, Outcome& out) {
    const Int8State& base = bases_[base_of_last_seed_];
    try {
      BlobHeader h = read_header(blob);
      if (h.kind == BlobKind::kPatch) {
        Patch p = decode_patch(blob, kLimits);
        Int8State s = base;
        try {
          apply_patch(s, p);
        } catch (const Error&) {
          // Refused: the state must be exactly the one we started from.
          if (!same_bytes(s, base) || !(s.state_hash() == base.state_hash()))
            ADD_FAILURE() << "a refused patch changed the state";
          throw;
        }
      } else {
        decode_anchor(blob, kLimits);
      }
      ++out.valid;
    } catch (const Error&) {
      ++out.refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "foreign exception: " << e.what();
    }
  }

  // A seed blob; the next feed() applies patches to that seed's base state.
  std::vector<uint8_t> pick_seed() {
    const Seed& seed = seeds_[rng_() % seeds_.size()];
    base_of_last_seed_ = seed.base;
    return seed.blob;
  }

  // Byte-level mutations of the whole blob (mostly stopped by the envelope checksums).
  void mutate_bytes(std::vector<uint8_t>& b) {
    switch (rng_() % 5) {
      case 0: {  // bit flips
        int n = 1 + static_cast<int>(rng_() % 8);
        for (int i = 0; i < n; ++i)
          b[rng_() % b.size()] ^= static_cast<uint8_t>(1u << (rng_() % 8));
        break;
      }
      case 1:  // truncation
        b.resize(rng_() % b.size());
        break;
      case 2: {  // random bytes
        size_t at = rng_() % b.size();
        size_t n = std::min<size_t>(b.size() - at, 1 + rng_() % 16);
        for (size_t i = 0; i < n; ++i) b[at + i] = static_cast<uint8_t>(rng_());
        break;
      }
      case 3:  // insertion
        b.insert(b.begin() + static_cast<long>(rng_() % b.size()), static_cast<uint8_t>(rng_()));
        break;
      default:  // appended garbage
        b.push_back(static_cast<uint8_t>(rng_()));
        break;
    }
  }

  // Writes an "interesting" integer (0, 1, -1, max, off-by-one sizes) at a random offset.
  void plant_integer(std::vector<uint8_t>& b, size_t lo, size_t hi) {
    if (hi <= lo) return;
    static const uint64_t kValues[] = {
        0,          1,          2,          0x7f,  0x80,       0xff, 0xffff, 0x7fffffff,
        0xffffffff, 1ull << 32, 1ull << 40, ~0ull, ~0ull >> 1, 31,   32,     33};
    uint64_t v = kValues[rng_() % std::size(kValues)];
    if (rng_() % 3 == 0) v = rng_();
    int width = 1 << (rng_() % 4);
    size_t at = lo + rng_() % (hi - lo);
    for (int i = 0; i < width && at + static_cast<size_t>(i) < hi; ++i)
      b[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  }

  // Structural mutations behind a valid envelope: decompress, mutate, re-seal.
  std::vector<uint8_t> mutate_payload(const std::vector<uint8_t>& seed) {
    BlobHeader h;
    std::vector<uint8_t> raw = open_blob(seed, &h);
    int n = 1 + static_cast<int>(rng_() % 3);
    for (int i = 0; i < n; ++i) {
      switch (rng_() % 4) {
        case 0:
          plant_integer(raw, 0, raw.size());
          break;
        case 1:
          raw[rng_() % raw.size()] ^= static_cast<uint8_t>(1u << (rng_() % 8));
          break;
        case 2:
          raw.resize(rng_() % raw.size());
          break;
        default:
          plant_integer(raw, 0, std::min<size_t>(raw.size(), 256));  // the first section's head
          break;
      }
      if (raw.empty()) break;
    }
    return seal_blob(h, raw, 1);
  }

  // Header fields with a recomputed header checksum (the payload checksum still holds).
  std::vector<uint8_t> mutate_header(std::vector<uint8_t> b) {
    plant_integer(b, 8, 96);
    Hash128 hh = hash_bytes(b.data(), 96);
    std::memcpy(b.data() + 96, &hh.high, 8);
    std::memcpy(b.data() + 104, &hh.low, 8);
    return b;
  }

  std::mt19937_64 rng_{20260204};

 private:
  struct Seed {
    std::vector<uint8_t> blob;
    int base;
  };
  Int8State bases_[2];
  std::vector<Seed> seeds_;
  int base_of_last_seed_ = 0;
};

TEST(PulseFuzz, SeedsAreValid) {
  Fuzzer f;
  Outcome out;
  for (int i = 0; i < 20; ++i) f.feed(f.pick_seed(), out);
  EXPECT_EQ(out.refused, 0);
}

// Mutations aimed at the f32 sections: every byte range that holds a router or expert_bias
// value in a tiny-lfm2moe patch or anchor is hit, behind a valid envelope.
TEST(PulseFuzz, F32SectionMutations) {
  auto moe = testing::moe_chain(2, 1e-6f);
  Patch p = make_patch(moe[0], moe[1]);
  std::vector<std::pair<std::vector<uint8_t>, bool>> blobs = {{encode_patch(p), true},
                                                              {encode_anchor(moe[1]), false}};
  std::mt19937_64 rng(77);
  int refused = 0, total = 0;
  for (const auto& [blob, is_patch] : blobs) {
    BlobHeader h;
    std::vector<uint8_t> raw = open_blob(blob, &h);
    // Where the f32 values lie in the payload.
    std::vector<std::pair<size_t, size_t>> ranges;
    auto locate = [&](const std::vector<uint32_t>& v) {
      auto* b = reinterpret_cast<const uint8_t*>(v.data());
      auto it = std::search(raw.begin(), raw.end(), b, b + v.size() * 4);
      ASSERT_NE(it, raw.end());
      ranges.push_back({static_cast<size_t>(it - raw.begin()), v.size() * 4});
    };
    if (is_patch) {
      for (const auto& t : p.tensors)
        if (t.kind == TensorKind::kF32) locate(t.f32);
    } else {
      for (const auto& [name, t] : moe[1].tensors())
        if (t.kind == TensorKind::kF32) locate(t.f32);
    }
    ASSERT_EQ(ranges.size(), 6u);
    for (int i = 0; i < 400; ++i) {
      auto [at, len] = ranges[rng() % ranges.size()];
      std::vector<uint8_t> r = raw;
      switch (rng() % 3) {
        case 0:  // a bit flip inside a value
          r[at + rng() % len] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:  // cut inside the section
          r.resize(at + rng() % len);
          break;
        default:  // the section's count/length fields just before the values
          r[at - 1 - rng() % std::min<size_t>(at, 24)] ^= static_cast<uint8_t>(1 + rng() % 255);
          break;
      }
      std::vector<uint8_t> sealed = seal_blob(h, r, 1);
      ++total;
      try {
        if (is_patch) {
          Int8State s = moe[0];
          try {
            apply_patch(s, decode_patch(sealed, kLimits));
          } catch (const Error&) {
            if (!same_bytes(s, moe[0])) ADD_FAILURE() << "a refused patch changed the state";
            throw;
          }
        } else {
          decode_anchor(sealed, kLimits);
        }
      } catch (const Error&) {
        ++refused;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "foreign exception: " << e.what();
      }
    }
  }
  // Every mutation changes a value, cuts the payload or breaks a count: none may verify.
  EXPECT_EQ(refused, total);
}

TEST(PulseFuzz, ByteMutationsOfTheWholeBlob) {
  Fuzzer f;
  Outcome out;
  for (int i = 0; i < 3000; ++i) {
    auto b = f.pick_seed();
    f.mutate_bytes(b);
    f.feed(b, out);
  }
  EXPECT_EQ(out.valid + out.refused, 3000);
  EXPECT_GT(out.refused, 2900);  // the envelope catches practically everything
}

TEST(PulseFuzz, StructuralMutationsBehindAValidEnvelope) {
  Fuzzer f;
  Outcome out;
  for (int i = 0; i < 3000; ++i) f.feed(f.mutate_payload(f.pick_seed()), out);
  EXPECT_EQ(out.valid + out.refused, 3000);
  EXPECT_GT(out.refused, 0);
  std::printf("payload mutations: %d decoded and applied, %d refused\n", out.valid, out.refused);
}

TEST(PulseFuzz, HeaderFieldMutationsWithARecomputedChecksum) {
  Fuzzer f;
  Outcome out;
  for (int i = 0; i < 2000; ++i) f.feed(f.mutate_header(f.pick_seed()), out);
  EXPECT_EQ(out.valid + out.refused, 2000);
  EXPECT_GT(out.refused, 0);
}

TEST(PulseFuzz, RandomBytesWithAValidLookingEnvelope) {
  Fuzzer f;
  Outcome out;
  for (int i = 0; i < 1000; ++i) {
    std::vector<uint8_t> raw(f.rng_() % 512);
    for (auto& x : raw) x = static_cast<uint8_t>(f.rng_());
    BlobHeader h;
    h.kind = f.rng_() % 2 ? BlobKind::kPatch : BlobKind::kAnchor;
    h.from_version = h.kind == BlobKind::kAnchor ? 1 : 0;
    h.to_version = 1;
    f.feed(seal_blob(h, raw, 1), out);
  }
  EXPECT_EQ(out.refused, 1000);
}

}  // namespace
}  // namespace stoa::pulse
