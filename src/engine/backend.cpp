#include "engine/backend.h"

#include <algorithm>

#include "core/error.h"

namespace stoa::engine {

std::span<const float> PassLogits::last(size_t i) const {
  STOA_CHECK(count(i) > 0, ErrorKind::kInvalidArgument, "batch input ", i, " asked for no logits");
  const int64_t row = (*rows_)[i].second - 1;
  return {data_ + row * vocab_, static_cast<size_t>(vocab_)};
}

std::vector<SampledToken> sample_requests(const PassLogits& logits,
                                          std::span<const SampleRequest> requests) {
  std::vector<SampledToken> out;
  out.reserve(requests.size());
  for (const SampleRequest& r : requests) {
    STOA_CHECK(r.input < logits.size(), ErrorKind::kInvalidArgument,
               "sample request for batch input ", r.input, " of ", logits.size());
    std::span<const float> row = logits.last(r.input);
    if (r.vocab > 0) row = row.first(std::min(row.size(), static_cast<size_t>(r.vocab)));
    out.push_back(sample_with_uniform(row, r.params, r.uniform));
  }
  return out;
}

std::vector<SampledToken> EngineBackend::forward_sampled(std::span<const BackendInput> inputs,
                                                         std::span<const SampleRequest> requests) {
  check_sample_requests(inputs, requests);
  return sample_requests(forward(inputs), requests);
}

}  // namespace stoa::engine
