// The engine arithmetic this build computes (docs/design/arithmetic.md; the number is
// kernels::v2::kEngineArithmetic) and the one rule every role applies to it: bits of two formulas
// are never compared. The hub refuses a worker or validator of another arithmetic at the door,
// and a worker or validator refuses a hub of another; each says so in words a volunteer can act
// on.
#pragma once
#include <string>

#include "kernels/arith_v2.h"

namespace stoa::engine {

inline constexpr int kArithmetic = kernels::v2::kEngineArithmetic;

// What the hub answers a `role` ("worker", "validator") that computes arithmetic `theirs`.
std::string arithmetic_refusal(const std::string& role, int theirs);

// Throws Error(kInvalidArgument) in plain words when the hub's run computes another arithmetic
// than this build (`role` names this machine's part, for the message).
void require_hub_arithmetic(int hub_arithmetic, const std::string& role);

}  // namespace stoa::engine
