#include <gtest/gtest.h>

#include <random>

#include "pulse/position_coding.h"

namespace stoa::pulse {
namespace {

const PositionCoding kAll[] = {PositionCoding::kVarint, PositionCoding::kFixed,
                               PositionCoding::kShuffled, PositionCoding::kRowCol};

std::vector<uint64_t> random_positions(uint64_t numel, double density, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution pick(density);
  std::vector<uint64_t> out;
  for (uint64_t i = 0; i < numel; ++i)
    if (pick(rng)) out.push_back(i);
  return out;
}

TEST(PulsePositionCoding, RoundTripsEveryCoding) {
  const uint64_t cols = 96;
  std::vector<std::vector<uint64_t>> cases = {
      {},
      {0},
      {cols * 50 - 1},
      {0, 1, 2, 3, 95, 96, 97, cols * 50 - 1},
      random_positions(cols * 50, 0.005, 1),
      random_positions(cols * 50, 0.3, 2),
      random_positions(cols * 50, 1.0, 3),
  };
  for (PositionCoding coding : kAll) {
    for (const auto& positions : cases) {
      std::vector<uint8_t> coded;
      encode_positions(positions, cols, coding, &coded);
      auto back = decode_positions(coded, positions.size(), cols * 50, cols, coding, "test");
      EXPECT_EQ(back, positions) << position_coding_name(coding);
    }
  }
}

TEST(PulsePositionCoding, WideGapsUseWideFields) {
  // Gaps beyond 32 bits: only the numbers are large, nothing is allocated for them.
  uint64_t numel = uint64_t{1} << 40;
  std::vector<uint64_t> positions = {5, (uint64_t{1} << 35) + 3, numel - 1};
  for (PositionCoding coding : kAll) {
    std::vector<uint8_t> coded;
    uint64_t cols = coding == PositionCoding::kRowCol ? 4096 : 1;
    encode_positions(positions, cols, coding, &coded);
    EXPECT_EQ(decode_positions(coded, 3, numel, cols, coding, "wide"), positions);
  }
}

TEST(PulsePositionCoding, RejectsMalformedStreams) {
  std::vector<uint64_t> positions = {3, 10, 50};
  for (PositionCoding coding : kAll) {
    std::vector<uint8_t> coded;
    encode_positions(positions, 16, coding, &coded);
    SCOPED_TRACE(position_coding_name(coding));
    // Wrong count, too small a tensor, trailing and missing bytes.
    EXPECT_THROW(decode_positions(coded, 2, 64, 16, coding, "t"), Error);
    EXPECT_THROW(decode_positions(coded, 4, 64, 16, coding, "t"), Error);
    EXPECT_THROW(decode_positions(coded, 3, 50, 16, coding, "t"), Error);
    auto longer = coded;
    longer.push_back(0);
    EXPECT_THROW(decode_positions(longer, 3, 64, 16, coding, "t"), Error);
    auto shorter = coded;
    shorter.pop_back();
    EXPECT_THROW(decode_positions(shorter, 3, 64, 16, coding, "t"), Error);
  }
  std::vector<uint8_t> overlong(11, 0xff);
  EXPECT_THROW(decode_positions(overlong, 1, 64, 16, PositionCoding::kVarint, "t"), Error);
  std::vector<uint8_t> bad_width = {3, 0, 0, 0};
  EXPECT_THROW(decode_positions(bad_width, 1, 64, 16, PositionCoding::kFixed, "t"), Error);
}

}  // namespace
}  // namespace stoa::pulse
