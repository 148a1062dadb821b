// Deterministic mutation fuzzing of everything a worker feeds with untrusted bytes: the envelope,
// the patch and anchor decoders and the applier. Every input must end in a valid result or a
// clean stoa::Error — never a crash, a foreign exception, undefined behaviour (CI runs this under
// ASan+UBSan) or a half-applied state.
#include <gtest/gtest.h>

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
    AdamSimulator sim(SimLayout{64, 64, 64, 1, 2, 2, 32}, 99);
    Int8Quantizer quant;
    base_ = quant.quantize(sim.views(), 0);
    sim.step(3e-3f);  // a large step: points, re-scaled groups and bf16 changes all present
    Int8State next = quant.quantize(sim.views(), 1);
    Patch p = make_patch(base_, next);
    size_t groups = 0;
    for (const auto& t : p.tensors) groups += t.groups.size();
    EXPECT_GT(groups, 0u);
    for (auto coding : {PositionCoding::kVarint, PositionCoding::kFixed, PositionCoding::kShuffled,
                        PositionCoding::kRowCol})
      patches_.push_back(encode_patch(p, EncodeOptions{coding, 1}));
    anchor_ = encode_anchor(next);
  }

  // Runs one input through the decoders (and the applier, for a patch).
  void feed(const std::vector<uint8_t>& blob, Outcome& out) {
    try {
      BlobHeader h = read_header(blob);
      if (h.kind == BlobKind::kPatch) {
        Patch p = decode_patch(blob, kLimits);
        Int8State s = base_;
        try {
          apply_patch(s, p);
        } catch (const Error&) {
          // Refused: the state must be exactly the one we started from.
          if (!same_bytes(s, base_) || !(s.state_hash() == base_.state_hash()))
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

  std::vector<uint8_t> pick_seed() {
    size_t i = rng_() % (patches_.size() + 1);
    return i < patches_.size() ? patches_[i] : anchor_;
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
  Int8State base_;
  std::vector<std::vector<uint8_t>> patches_;
  std::vector<uint8_t> anchor_;
};

TEST(PulseFuzz, SeedsAreValid) {
  Fuzzer f;
  Outcome out;
  for (int i = 0; i < 5; ++i) f.feed(f.pick_seed(), out);
  EXPECT_EQ(out.refused, 0);
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
