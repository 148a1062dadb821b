// recall@k of a retriever: the fraction of queries whose gold document id is among the top k.
// Used to describe datasets (docs/tasks.md) and by the search benchmark.
#pragma once
#include <string>
#include <vector>

#include "env/tasks/search/retriever.h"

namespace stoa::env {

struct RecallResult {
  int64_t queries = 0;
  int64_t hits = 0;
  double recall() const { return queries ? static_cast<double>(hits) / queries : 0.0; }
};

// queries[i] is expected to retrieve gold_ids[i].
RecallResult recall_at_k(const Retriever& retriever, const std::vector<std::string>& queries,
                         const std::vector<std::string>& gold_ids, int k);

}  // namespace stoa::env
