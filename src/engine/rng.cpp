#include "engine/rng.h"

namespace stoa::engine {

Rng::Rng(uint64_t seed, uint64_t stream)
    : g_(Xoshiro256StarStar::seeded_by_splitmix(
          seed ^ (stream * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL))) {}

uint64_t Rng::next_u64() {
  return g_.next();
}

double Rng::uniform() {
  return g_.uniform();
}

}  // namespace stoa::engine
