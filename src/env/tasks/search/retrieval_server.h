// Search-R1's retrieval service over HTTP, backed by any Retriever:
//   POST /retrieve {"queries": ["..", ..], "topk": 3, "return_scores": true}
//     -> {"result": [[{"document": {"id": "..", "contents": ".."}, "score": 1.5}, ..], ..]}
//     (without return_scores each hit is the bare document object, as in Search-R1)
//   GET /health -> {"status": "ok"}
// Malformed requests get HTTP 400 with {"error": "..."}; any query text is served.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "env/tasks/search/retriever.h"

namespace httplib {
class Server;
}

namespace stoa::env {

struct RetrievalServerOptions {
  int default_topk = 3;
  size_t max_queries = 4096;            // per request
  size_t max_body_bytes = 64ull << 20;  // whole request
};

class RetrievalServer {
 public:
  RetrievalServer(const Retriever& retriever, RetrievalServerOptions options = {});
  ~RetrievalServer();

  // Binds host:port (port 0 picks a free one) and returns the port; throws kNetwork on failure.
  int bind(const std::string& host, int port);
  // Serves until stop() is called (from another thread or a signal handler's thread).
  void serve();
  void stop();

  // The request handling itself, without HTTP: returns (status, body). Exposed for tests.
  std::pair<int, nlohmann::json> handle_retrieve(const std::string& body) const;

 private:
  const Retriever& retriever_;
  RetrievalServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
};

}  // namespace stoa::env
