// Deterministic mutation fuzzing of everything a worker feeds with untrusted bytes: the envelope,
// the patch and anchor decoders and the applier. Every input must end in a valid result or a
// clean stoa::Error of kind kBadFormat or kIntegrity — never a crash, a foreign exception,
// undefined behaviour (CI runs this under ASan+UBSan) or a half-applied state. An input that is
// accepted must produce exactly the state its hashes name: the seed's own target, byte for byte.
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
  int valid = 0;             // decoded (and applied) to exactly the seed's target state
  int refused = 0;           // a clean stoa::Error
  int refused_on_apply = 0;  // of those: a patch that decoded, refused by the applier's checks
  int relabelled = 0;        // of the valid: the header named another version than the seed's
};

// same_bytes without the version label.
bool same_content(const Int8State& a, const Int8State& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, ta] : a.tensors()) {
    if (!b.has(name)) return false;
    const StateTensor& tb = b.at(name);
    if (ta.kind != tb.kind || ta.shape != tb.shape || ta.q.values != tb.q.values ||
        ta.q.scales != tb.q.scales || ta.bf16 != tb.bf16 || ta.f32 != tb.f32)
      return false;
  }
  return true;
}

// What an untrusted blob may be refused with: malformed (kBadFormat) or not matching its own
// hashes (kIntegrity). Anything else (kInvalidArgument from a constructor, kInternal) means a
// check is missing in the decoder.
bool is_blob_error(const Error& e) {
  return e.kind() == ErrorKind::kBadFormat || e.kind() == ErrorKind::kIntegrity;
}

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
    targets_.push_back(next);
    const int target = static_cast<int>(targets_.size()) - 1;
    for (auto coding : {PositionCoding::kVarint, PositionCoding::kFixed, PositionCoding::kShuffled,
                        PositionCoding::kRowCol})
      seeds_.push_back({encode_patch(p, EncodeOptions{coding, 1}), base, target});
    seeds_.push_back({encode_anchor(next), base, target});
  }

  // Runs one input through the decoders (and the applier, for a patch, on the seed's base).
  void feed(const std::vector<uint8_t>& blob, Outcome& out) {
    const Int8State& base = bases_[last_seed_.base];
    const Int8State& target = targets_[last_seed_.target];
    try {
      BlobHeader h = read_header(blob);
      Int8State result;
      if (h.kind == BlobKind::kPatch) {
        Patch p = decode_patch(blob, kLimits);
        result = base;
        try {
          apply_patch(result, p);
        } catch (const Error&) {
          // Refused: the state must be exactly the one we started from.
          if (!same_bytes(result, base) || !(result.state_hash() == base.state_hash()))
            ADD_FAILURE() << "a refused patch changed the state";
          ++out.refused_on_apply;
          throw;
        }
        EXPECT_TRUE(result.state_hash() == p.result_state_hash)
            << "an applied patch missed its hash";
      } else {
        result = decode_anchor(blob, kLimits);
      }
      // Accepted: the very state the seed encodes (values, scales, bf16, f32), the one the
      // envelope's hash names, at the version the header names. The state hash covers content,
      // not the version label: a header mutation with a recomputed checksum may relabel it.
      EXPECT_EQ(result.version(), h.to_version);
      if (h.to_version != target.version()) ++out.relabelled;
      EXPECT_TRUE(same_content(result, target)) << "an accepted blob built a different state";
      EXPECT_TRUE(result.state_hash() == h.state_hash) << "an accepted blob missed its state hash";
      ++out.valid;
    } catch (const Error& e) {
      EXPECT_TRUE(is_blob_error(e)) << error_kind_name(e.kind()) << ": " << e.what();
      ++out.refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "foreign exception: " << e.what();
    }
  }

  // A seed blob; the next feed() applies patches to that seed's base state.
  std::vector<uint8_t> pick_seed() {
    last_seed_ = seeds_[rng_() % seeds_.size()];
    return last_seed_.blob;
  }
  // The blob pick_seed() returned last, unmutated.
  const std::vector<uint8_t>& last_seed() const { return last_seed_.blob; }

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
    int base = 0;    // the state a patch applies to
    int target = 0;  // the state the blob encodes (targets_)
  };
  Int8State bases_[2];
  std::vector<Int8State> targets_;
  std::vector<Seed> seeds_;
  Seed last_seed_;
};

TEST(PulseFuzz, SeedsAreValid) {
  Fuzzer f;
  Outcome out;
  for (int i = 0; i < 20; ++i) f.feed(f.pick_seed(), out);
  EXPECT_EQ(out.refused, 0);
  EXPECT_EQ(out.valid, 20);
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
      } catch (const Error& e) {
        EXPECT_TRUE(is_blob_error(e)) << error_kind_name(e.kind()) << ": " << e.what();
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
  int unchanged = 0;
  for (int i = 0; i < 3000; ++i) {
    auto b = f.pick_seed();
    f.mutate_bytes(b);
    unchanged += b == f.last_seed();  // random bytes equal to the ones they replace
    f.feed(b, out);
  }
  // The envelope hashes every byte and fixes the length: exactly the blobs that came out
  // unchanged are accepted (and build their target, checked in feed).
  EXPECT_EQ(out.valid + out.refused, 3000);
  EXPECT_EQ(out.valid, unchanged);
  EXPECT_EQ(out.refused_on_apply, 0);
  EXPECT_EQ(out.relabelled, 0);
}

TEST(PulseFuzz, StructuralMutationsBehindAValidEnvelope) {
  Fuzzer f;
  Outcome out;
  for (int i = 0; i < 3000; ++i) f.feed(f.mutate_payload(f.pick_seed()), out);
  std::printf("payload mutations: %d decoded and applied, %d refused (%d by the applier)\n",
              out.valid, out.refused, out.refused_on_apply);
  EXPECT_EQ(out.valid + out.refused, 3000);
  // Behind a valid envelope the decoder's own checks and the applier's hashes must do the work:
  // both refuse, and whatever passes built its target exactly (checked in feed).
  EXPECT_GT(out.refused - out.refused_on_apply, 1000);
  EXPECT_GT(out.refused_on_apply, 0);
  EXPECT_EQ(out.relabelled, 0);
}

TEST(PulseFuzz, HeaderFieldMutationsWithARecomputedChecksum) {
  Fuzzer f;
  Outcome out;
  for (int i = 0; i < 2000; ++i) f.feed(f.mutate_header(f.pick_seed()), out);
  std::printf(
      "header mutations: %d accepted (%d under another version), %d refused (%d by the "
      "applier)\n",
      out.valid, out.relabelled, out.refused, out.refused_on_apply);
  EXPECT_EQ(out.valid + out.refused, 2000);
  EXPECT_GT(out.refused, 1000);
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
  EXPECT_EQ(out.valid, 0);
}

}  // namespace
}  // namespace stoa::pulse
