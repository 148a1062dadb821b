// Codings of a sorted list of changed positions (flat element indices, strictly increasing)
// inside one tensor. All code gaps, not positions: g_0 = p_0, g_i = p_i - p_(i-1) - 1, so
// adjacent positions cost a zero. Layouts are byte for byte in docs/pulse-format.md.
//
//   kVarint    LEB128 of each gap.
//   kFixed     one width byte w in {1,2,4,8} (the narrowest that holds the largest gap), then
//              the gaps as w-byte little-endian integers.
//   kShuffled  like kFixed but stored as byte planes (all low bytes, then all next bytes, ...):
//              the high planes are almost all zero, which zstd then squeezes to nearly nothing.
//   kRowCol    row/column split as in the PULSE reference: per touched row a row gap, a count
//              and the column gaps, all LEB128.
// The bench measured which is smallest after zstd on realistic sparsity; the encoder's default
// is that one (see kDefaultPositionCoding and docs/design/pulse.md).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/byte_io.h"

namespace stoa::pulse {

enum class PositionCoding : uint8_t { kVarint = 1, kFixed = 2, kShuffled = 3, kRowCol = 4 };
const char* position_coding_name(PositionCoding coding);
bool valid_position_coding(uint8_t value);

// Appends the coded positions to `out`. `cols` is the row length used by kRowCol (>= 1).
void encode_positions(std::span<const uint64_t> positions, uint64_t cols, PositionCoding coding,
                      std::vector<uint8_t>* out);

// Decodes exactly `count` positions from `coded` (which must be consumed exactly), checking that
// every position is < numel. Throws kBadFormat naming `what`.
std::vector<uint64_t> decode_positions(std::span<const uint8_t> coded, uint64_t count,
                                       uint64_t numel, uint64_t cols, PositionCoding coding,
                                       const std::string& what);

}  // namespace stoa::pulse
