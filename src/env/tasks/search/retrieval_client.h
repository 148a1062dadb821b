// A Retriever that asks a Search-R1 retrieval server (ours or the Python original) over HTTP.
#pragma once
#include <string>

#include "env/tasks/search/retriever.h"

namespace stoa::env {

class RetrievalClient final : public Retriever {
 public:
  // url: "http://host:port" or "http://host:port/retrieve" (the path defaults to /retrieve).
  explicit RetrievalClient(const std::string& url, double timeout_seconds = 30);

  // Throws kNetwork when the server is unreachable or answers with an error or a malformed body.
  std::vector<std::vector<RetrievedDoc>> search(const std::vector<std::string>& queries,
                                                int topk) const override;

 private:
  std::string origin_;  // scheme://host:port
  std::string path_;
  double timeout_seconds_;
};

}  // namespace stoa::env
