// Bit-exactness over realistic chains: f32 master weights N(0, 0.02) updated by simulated AdamW
// at RL learning rates; the sender quantises each version on its frozen grid, the receiver only
// ever sees blobs. Every application must land on the sender's view bit for bit.
#include <gtest/gtest.h>

#include "pulse/format.h"
#include "pulse/patch.h"
#include "pulse_test_util.h"

namespace stoa::pulse {
namespace {

using testing::same_bytes;

struct Counts {
  int applied = 0;
  int exact = 0;
};

void check(const Int8State& got, const Int8State& want, Counts& c) {
  ++c.applied;
  bool ok =
      same_bytes(got, want) && got.state_hash() == want.state_hash() && got.verify_cached_hashes();
  c.exact += ok;
  EXPECT_TRUE(ok) << "version " << want.version();
}

class PulseBitExact : public ::testing::TestWithParam<float> {};

TEST_P(PulseBitExact, EveryApplicationIsBitIdentical) {
  float lr = GetParam();
  // A schedule with an occasional large step so that re-scaled groups appear in the chain too.
  AdamSimulator sim(sim_layout_tiny(), 1234);
  Int8Quantizer quant;
  std::vector<Int8State> sender;
  std::vector<std::vector<uint8_t>> blobs;  // blobs[i] = patch i -> i+1
  sender.push_back(quant.quantize(sim.views(), 0));
  const int kVersions = 24;
  int64_t rescaled = 0;
  for (int v = 1; v < kVersions; ++v) {
    sim.step(v % 8 == 0 ? lr * 300.0f : lr);
    QuantizeStats stats;
    sender.push_back(quant.quantize(sim.views(), static_cast<uint64_t>(v), &stats));
    rescaled += stats.rescaled_clip + stats.rescaled_shrink;
    blobs.push_back(encode_patch(make_patch(sender[v - 1], sender[v])));
  }
  EXPECT_GT(rescaled, 0);
  Counts c;
  // 1. The receiver follows the chain blob by blob.
  Int8State r = decode_anchor(encode_anchor(sender[0]));
  check(r, sender[0], c);
  for (int v = 1; v < kVersions; ++v) {
    apply_patch(r, decode_patch(blobs[v - 1]));
    check(r, sender[v], c);
  }
  // 2. Composed patches over every window of k versions, through the wire format.
  for (int k : {2, 3, 5, 8, kVersions - 1}) {
    for (int from = 0; from + k < kVersions; from += k) {
      Patch composed = decode_patch(blobs[from]);
      for (int i = from + 1; i < from + k; ++i)
        composed = compose_patches(composed, decode_patch(blobs[i]));
      Int8State w = sender[from];
      apply_patch(w, decode_patch(encode_patch(composed)));
      check(w, sender[from + k], c);
    }
  }
  // 3. Catch-up from an anchor (every 5th version) followed by patches.
  for (int a = 0; a < kVersions; a += 5) {
    Int8State w = decode_anchor(encode_anchor(sender[a]));
    for (int v = a + 1; v < kVersions; ++v) apply_patch(w, decode_patch(blobs[v - 1]));
    check(w, sender[kVersions - 1], c);
  }
  EXPECT_EQ(c.exact, c.applied);
  std::printf("lr %g: %d of %d applications bit-identical, %lld groups re-scaled\n", lr, c.exact,
              c.applied, static_cast<long long>(rescaled));
}

INSTANTIATE_TEST_SUITE_P(LearningRates, PulseBitExact, ::testing::Values(1e-6f, 3e-6f, 1e-5f));

}  // namespace
}  // namespace stoa::pulse
