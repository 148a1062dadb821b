#include "roles/episode/topk_row.h"

#include <algorithm>

namespace stoa::episode {

void topk_row(const engine::SampledToken& t, int32_t topk, std::vector<int32_t>& ids,
              std::vector<float>& lps) {
  for (const auto& e : t.top) {
    if (ids.size() == static_cast<size_t>(topk)) break;
    ids.push_back(e.token);
    lps.push_back(e.logprob);
  }
  if (std::find(ids.begin(), ids.end(), t.token) == ids.end()) {
    if (ids.size() == static_cast<size_t>(topk)) {
      ids.back() = t.token;
      lps.back() = t.logprob;
    }
  }
  while (ids.size() < static_cast<size_t>(topk)) {
    ids.push_back(t.token);
    lps.push_back(t.logprob);
  }
}

}  // namespace stoa::episode
