// The top-K row a sampled token is submitted with. The worker builds it as it generates and the
// replay validator rebuilds it from the replayed distribution; both must call this one function,
// or an honest worker's rows would fail their replay. It lives here, below the worker and the
// verifier, because it needs only the engine's SampledToken.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/sampler.h"

namespace stoa::episode {

// The sampler's most likely tokens (`t.top`), and always the sampled one (the hub checks it; it
// replaces the last entry when missing); a short row is padded with it. Appends to ids and lps.
void topk_row(const engine::SampledToken& t, int32_t topk, std::vector<int32_t>& ids,
              std::vector<float>& lps);

}  // namespace stoa::episode
