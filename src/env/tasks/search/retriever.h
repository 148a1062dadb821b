// Something that answers search queries with ranked documents: a local Xapian index
// (Bm25Index) or a remote Search-R1 retrieval server (RetrievalClient). A worker holds a
// Retriever and does not care which.
#pragma once
#include <string>
#include <vector>

#include "env/tasks/search/search_protocol.h"

namespace stoa::env {

class Retriever {
 public:
  virtual ~Retriever() = default;
  // For every query, up to topk documents, best first. Any query text is allowed (empty, huge,
  // binary): it yields few or no documents, never an error. Thread-safe.
  virtual std::vector<std::vector<RetrievedDoc>> search(const std::vector<std::string>& queries,
                                                        int topk) const = 0;
};

}  // namespace stoa::env
