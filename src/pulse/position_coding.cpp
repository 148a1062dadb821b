#include "pulse/position_coding.h"

#include "core/enum_names.h"
#include "core/error.h"

namespace stoa::pulse {

constexpr EnumName<PositionCoding> kPositionCodingNames[] = {
    {PositionCoding::kVarint, "varint"},
    {PositionCoding::kFixed, "fixed"},
    {PositionCoding::kShuffled, "shuffled"},
    {PositionCoding::kRowCol, "rowcol"}};

const char* position_coding_name(PositionCoding coding) {
  return enum_name(kPositionCodingNames, coding);
}

bool valid_position_coding(uint8_t value) {
  return value >= 1 && value <= 4;
}

static int width_for(uint64_t max_gap) {
  if (max_gap <= 0xff) return 1;
  if (max_gap <= 0xffff) return 2;
  if (max_gap <= 0xffffffffull) return 4;
  return 8;
}

void encode_positions(std::span<const uint64_t> positions, uint64_t cols, PositionCoding coding,
                      std::vector<uint8_t>* out) {
  ByteWriter w(out);
  auto gap = [&](size_t i) { return i == 0 ? positions[0] : positions[i] - positions[i - 1] - 1; };
  switch (coding) {
    case PositionCoding::kVarint:
      for (size_t i = 0; i < positions.size(); ++i) w.varint(gap(i));
      return;
    case PositionCoding::kFixed:
    case PositionCoding::kShuffled: {
      uint64_t max_gap = 0;
      for (size_t i = 0; i < positions.size(); ++i) max_gap = std::max(max_gap, gap(i));
      int width = width_for(max_gap);
      w.u8(static_cast<uint8_t>(width));
      size_t n = positions.size();
      size_t base = out->size();
      out->resize(base + n * static_cast<size_t>(width));
      uint8_t* dst = out->data() + base;
      bool shuffled = coding == PositionCoding::kShuffled;
      for (size_t i = 0; i < n; ++i) {
        uint64_t g = gap(i);
        for (int b = 0; b < width; ++b) {
          uint8_t byte = static_cast<uint8_t>(g >> (8 * b));
          if (shuffled)
            dst[static_cast<size_t>(b) * n + i] = byte;
          else
            dst[i * static_cast<size_t>(width) + static_cast<size_t>(b)] = byte;
        }
      }
      return;
    }
    case PositionCoding::kRowCol: {
      STOA_CHECK(cols >= 1, ErrorKind::kInvalidArgument, "rowcol coding needs cols >= 1");
      // Count the touched rows first: the decoder needs it to know where the stream ends.
      uint64_t rows_touched = 0;
      for (size_t i = 0; i < positions.size(); ++i)
        if (i == 0 || positions[i] / cols != positions[i - 1] / cols) ++rows_touched;
      w.varint(rows_touched);
      size_t i = 0;
      uint64_t prev_row = 0;
      bool first_row = true;
      while (i < positions.size()) {
        uint64_t row = positions[i] / cols;
        size_t j = i;
        while (j < positions.size() && positions[j] / cols == row) ++j;
        w.varint(first_row ? row : row - prev_row - 1);
        w.varint(j - i);
        uint64_t prev_col = 0;
        for (size_t k = i; k < j; ++k) {
          uint64_t col = positions[k] % cols;
          w.varint(k == i ? col : col - prev_col - 1);
          prev_col = col;
        }
        prev_row = row;
        first_row = false;
        i = j;
      }
      return;
    }
  }
  fail(ErrorKind::kInvalidArgument, "unknown position coding ", static_cast<int>(coding));
}

// kFixed / kShuffled with the width known at compile time (the hot loop of a patch's decode: a
// 0.5% patch of the 8.9 GB model holds ~45 M positions). Writes out[i] for every gap of `bytes`
// (n = bytes.size() / W gaps); returns the index of the first position outside [0, numel), or n.
template <int W, bool Shuffled>
static uint64_t gaps_to_positions(std::span<const uint8_t> bytes, uint64_t numel, uint64_t* out) {
  const size_t n = bytes.size() / W;
  const uint8_t* b = bytes.data();
  uint64_t next = 0;  // the smallest position the next one may take (previous + 1)
  for (size_t i = 0; i < n; ++i) {
    uint64_t g = 0;
    for (int k = 0; k < W; ++k)
      g |= static_cast<uint64_t>(Shuffled ? b[static_cast<size_t>(k) * n + i]
                                          : b[i * W + static_cast<size_t>(k)])
           << (8 * k);
    if (next >= numel || g >= numel - next) return i;
    out[i] = next + g;
    next = out[i] + 1;
  }
  return n;
}

// The same for a width read from the blob (1, 2, 4 or 8; checked by the caller).
template <bool Shuffled>
static uint64_t fixed_gaps_to_positions(std::span<const uint8_t> bytes, int width, uint64_t numel,
                                        uint64_t* out) {
  switch (width) {
    case 1:
      return gaps_to_positions<1, Shuffled>(bytes, numel, out);
    case 2:
      return gaps_to_positions<2, Shuffled>(bytes, numel, out);
    case 4:
      return gaps_to_positions<4, Shuffled>(bytes, numel, out);
    default:
      return gaps_to_positions<8, Shuffled>(bytes, numel, out);
  }
}

std::vector<uint64_t> decode_positions(std::span<const uint8_t> coded, uint64_t count,
                                       uint64_t numel, uint64_t cols, PositionCoding coding,
                                       const std::string& what) {
  ByteReader r(coded, what);
  // Every coding spends at least one byte per position (kFixed/kShuffled: exactly w), so a
  // count larger than the coded bytes is malformed; checking first bounds the allocation.
  if (count > coded.size()) r.bad(cat("claims ", count, " positions in ", coded.size(), " bytes"));
  if (count > numel) r.bad(cat("claims ", count, " positions in a tensor of ", numel));
  std::vector<uint64_t> out;
  out.reserve(static_cast<size_t>(count));
  // next = the smallest position the next one may take (previous + 1).
  uint64_t next = 0;
  auto push = [&](uint64_t g) {
    if (g >= numel - next || next >= numel)
      r.bad(cat("position ", out.size(), " lies outside the tensor of ", numel, " elements"));
    uint64_t p = next + g;
    out.push_back(p);
    next = p + 1;
  };
  switch (coding) {
    case PositionCoding::kVarint:
      for (uint64_t i = 0; i < count; ++i) push(r.varint("position gap"));
      break;
    case PositionCoding::kFixed:
    case PositionCoding::kShuffled: {
      if (count == 0 && r.done()) break;
      int width = r.u8("position width");
      if (width != 1 && width != 2 && width != 4 && width != 8)
        r.bad(cat("position width ", width, " is not 1, 2, 4 or 8"));
      r.need(count, static_cast<uint64_t>(width), "positions");
      auto bytes = r.take(count * static_cast<uint64_t>(width), "positions");
      const bool shuffled = coding == PositionCoding::kShuffled;
      out.resize(static_cast<size_t>(count));
      const uint64_t bad_at = shuffled
                                  ? fixed_gaps_to_positions<true>(bytes, width, numel, out.data())
                                  : fixed_gaps_to_positions<false>(bytes, width, numel, out.data());
      if (bad_at < count)
        r.bad(cat("position ", bad_at, " lies outside the tensor of ", numel, " elements"));
      break;
    }
    case PositionCoding::kRowCol: {
      if (cols == 0 || numel % cols != 0) r.bad(cat("rowcol coding with ", cols, " columns"));
      uint64_t rows = numel / cols;
      uint64_t rows_touched = r.varint("touched row count");
      if (rows_touched > count) r.bad(cat(rows_touched, " touched rows for ", count, " positions"));
      // Rows, and the columns within a row, are increasing indices below a limit, each coded
      // as its gap after the one before (`lowest`: the smallest the next one may take).
      auto next_index = [&r](uint64_t& lowest, uint64_t limit, const char* gap,
                             const char* outside) {
        uint64_t g = r.varint(gap);
        if (lowest >= limit || g >= limit - lowest) r.bad(outside);
        uint64_t index = lowest + g;
        lowest = index + 1;
        return index;
      };
      uint64_t next_row = 0;
      for (uint64_t t = 0; t < rows_touched; ++t) {
        uint64_t row = next_index(next_row, rows, "row gap", "row lies outside the tensor");
        uint64_t n = r.varint("row count");
        if (n == 0 || n > count - out.size()) r.bad(cat("row holds ", n, " positions"));
        uint64_t next_col = 0;
        for (uint64_t k = 0; k < n; ++k) {
          uint64_t col = next_index(next_col, cols, "column gap", "column lies outside the row");
          uint64_t p = row * cols + col;
          out.push_back(p);  // rows and columns increase, so positions do too
        }
      }
      break;
    }
    default:
      r.bad(cat("unknown position coding ", static_cast<int>(coding)));
  }
  if (out.size() != count) r.bad(cat("holds ", out.size(), " positions, expected ", count));
  if (!r.done()) r.bad(cat(r.remaining(), " trailing bytes after the positions"));
  return out;
}

}  // namespace stoa::pulse
