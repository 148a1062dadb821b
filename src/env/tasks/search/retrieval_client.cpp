#include "env/tasks/search/retrieval_client.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "env/task.h"

namespace stoa::env {

RetrievalClient::RetrievalClient(const std::string& url, double timeout_seconds)
    : timeout_seconds_(timeout_seconds) {
  std::string rest = url;
  std::string scheme = "http://";
  if (rest.rfind("http://", 0) == 0) {
    rest = rest.substr(7);
  } else if (rest.rfind("https://", 0) == 0) {
    fail(ErrorKind::kUnsupported, "retrieval client: https is not supported (", url,
         "); put the server behind a local proxy or use http");
  }
  size_t slash = rest.find('/');
  std::string host_port = rest.substr(0, slash);
  path_ = slash == std::string::npos ? "/retrieve" : rest.substr(slash);
  if (path_ == "/") path_ = "/retrieve";
  STOA_CHECK(!host_port.empty(), ErrorKind::kInvalidArgument, "retrieval client: bad url ", url);
  origin_ = scheme + host_port;
}

std::vector<std::vector<RetrievedDoc>> RetrievalClient::search(
    const std::vector<std::string>& queries, int topk) const {
  if (queries.empty()) return {};
  // A client per call: httplib::Client is not thread-safe and loopback connections are cheap.
  httplib::Client client(origin_);
  auto seconds = static_cast<time_t>(timeout_seconds_);
  auto micros = static_cast<time_t>((timeout_seconds_ - seconds) * 1e6);
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  client.set_write_timeout(seconds, micros);
  nlohmann::json request = {{"queries", queries}, {"topk", topk}, {"return_scores", true}};
  auto body = request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto res = client.Post(path_, body, "application/json");
  // The server's failures are the environment's, not a worker's (env/task.h).
  if (!res)
    throw EnvironmentError(cat("retrieval server ", origin_, path_,
                               " unreachable: ", httplib::to_string(res.error())));
  if (res->status != 200)
    throw EnvironmentError(cat("retrieval server ", origin_, path_, " answered HTTP ", res->status,
                               ": ", res->body.substr(0, 300)));
  nlohmann::json reply = nlohmann::json::parse(res->body, nullptr, false);
  STOA_CHECK(!reply.is_discarded() && reply.is_object() && reply.contains("result") &&
                 reply["result"].is_array() && reply["result"].size() == queries.size(),
             ErrorKind::kNetwork, "retrieval server ", origin_, path_,
             " sent a malformed reply (want {\"result\": [one list per query]})");
  std::vector<std::vector<RetrievedDoc>> out;
  for (const auto& list : reply["result"]) {
    STOA_CHECK(list.is_array(), ErrorKind::kNetwork, "retrieval reply: result entry is not a list");
    std::vector<RetrievedDoc> docs;
    for (const auto& hit : list) {
      // With return_scores a hit is {"document": {...}, "score": s}; accept bare documents too.
      const nlohmann::json& doc = hit.contains("document") ? hit["document"] : hit;
      STOA_CHECK(doc.is_object() && doc.contains("contents") && doc["contents"].is_string(),
                 ErrorKind::kNetwork, "retrieval reply: a hit lacks document contents");
      RetrievedDoc out_doc;
      if (doc.contains("id")) {
        out_doc.id = doc["id"].is_string() ? doc["id"].get<std::string>() : doc["id"].dump();
      }
      out_doc.contents = doc["contents"].get<std::string>();
      if (hit.contains("score") && hit["score"].is_number())
        out_doc.score = hit["score"].get<double>();
      docs.push_back(std::move(out_doc));
    }
    out.push_back(std::move(docs));
  }
  return out;
}

}  // namespace stoa::env
