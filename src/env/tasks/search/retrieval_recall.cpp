#include "env/tasks/search/retrieval_recall.h"

#include "core/error.h"

namespace stoa::env {

RecallResult recall_at_k(const Retriever& retriever, const std::vector<std::string>& queries,
                         const std::vector<std::string>& gold_ids, int k) {
  STOA_CHECK(queries.size() == gold_ids.size(), ErrorKind::kInvalidArgument,
             "recall_at_k: ", queries.size(), " queries but ", gold_ids.size(), " gold ids");
  RecallResult result;
  constexpr size_t kBatch = 256;
  for (size_t begin = 0; begin < queries.size(); begin += kBatch) {
    size_t end = std::min(queries.size(), begin + kBatch);
    std::vector<std::string> batch(queries.begin() + begin, queries.begin() + end);
    auto hits = retriever.search(batch, k);
    for (size_t i = begin; i < end; ++i) {
      ++result.queries;
      for (const auto& doc : hits[i - begin]) {
        if (doc.id == gold_ids[i]) {
          ++result.hits;
          break;
        }
      }
    }
  }
  return result;
}

}  // namespace stoa::env
