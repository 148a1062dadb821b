#include "engine/arithmetic.h"

#include "core/error.h"

namespace stoa::engine {

std::string arithmetic_refusal(const std::string& role, int theirs) {
  return cat("this ", role, " computes engine arithmetic ", theirs, " and this run arithmetic ",
             kArithmetic,
             " (docs/design/arithmetic.md): the hub could not check its work bit for bit. Install "
             "the stoa release the run's operator uses, then join again.");
}

void require_hub_arithmetic(int hub_arithmetic, const std::string& role) {
  STOA_CHECK(hub_arithmetic == kArithmetic, ErrorKind::kInvalidArgument,
             "the hub's run computes engine arithmetic ", hub_arithmetic, " and this ", role,
             " arithmetic ", kArithmetic,
             " (docs/design/arithmetic.md): its work could not be checked. Install the stoa "
             "release the run's operator uses, then join again.");
}

}  // namespace stoa::engine
