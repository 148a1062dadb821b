// A forward pass's input: the new tokens of one or more sequences, laid out back to back. Each
// segment is one sequence's run of tokens, in order, starting at the sequence's current length;
// positions are explicit per token so every block reads them from one place.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/sequence.h"

namespace stoa::engine {

struct BatchSegment {
  Sequence* seq = nullptr;
  int64_t offset = 0;  // first token of the segment in the batch
  int64_t count = 0;
  int64_t start_position() const { return seq->length(); }
};

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;  // positions[t] = its sequence's length + index in segment
  std::vector<BatchSegment> segments;
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

}  // namespace stoa::engine
