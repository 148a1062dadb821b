#include "env/tasks/search/retrieval_server.h"

#include <httplib.h>

#include "core/error.h"
#include "core/log.h"

namespace stoa::env {
namespace {

std::string dump(const nlohmann::json& j) {
  // Corpus text may hold invalid UTF-8; replace it rather than fail the whole response.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::pair<int, nlohmann::json> bad_request(const std::string& message) {
  return {400, {{"error", message}}};
}

}  // namespace

RetrievalServer::RetrievalServer(const Retriever& retriever, RetrievalServerOptions options)
    : retriever_(retriever), options_(options), server_(std::make_unique<httplib::Server>()) {
  server_->set_payload_max_length(options_.max_body_bytes);
  server_->Post("/retrieve", [this](const httplib::Request& req, httplib::Response& res) {
    auto [status, body] = handle_retrieve(req.body);
    res.status = status;
    res.set_content(dump(body), "application/json");
  });
  server_->Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  server_->set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        log_error("search", req.method, " ", req.path, ": ", what);
        res.status = 500;
        res.set_content(dump({{"error", what}}), "application/json");
      });
}

RetrievalServer::~RetrievalServer() {
  stop();
}

std::pair<int, nlohmann::json> RetrievalServer::handle_retrieve(const std::string& body) const {
  nlohmann::json request = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) return bad_request("request body is not valid JSON");
  if (!request.is_object()) return bad_request("request must be a JSON object");
  auto queries_it = request.find("queries");
  if (queries_it == request.end()) return bad_request("missing field \"queries\"");
  if (!queries_it->is_array()) return bad_request("\"queries\" must be a list of strings");
  if (queries_it->size() > options_.max_queries)
    return bad_request(cat("too many queries: ", queries_it->size(), " > ", options_.max_queries));
  std::vector<std::string> queries;
  for (const auto& q : *queries_it) {
    if (!q.is_string()) return bad_request("\"queries\" must be a list of strings");
    queries.push_back(q.get<std::string>());
  }
  int topk = options_.default_topk;
  if (auto it = request.find("topk"); it != request.end() && !it->is_null()) {
    if (!it->is_number_integer()) return bad_request("\"topk\" must be an integer");
    int64_t k = it->get<int64_t>();
    if (k < 1 || k > 1000) return bad_request(cat("\"topk\" must be in [1, 1000], got ", k));
    topk = static_cast<int>(k);
  }
  bool return_scores = false;
  if (auto it = request.find("return_scores"); it != request.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad_request("\"return_scores\" must be true or false");
    return_scores = it->get<bool>();
  }
  auto hits = retriever_.search(queries, topk);
  nlohmann::json result = nlohmann::json::array();
  for (const auto& per_query : hits) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& hit : per_query) {
      nlohmann::json doc = {{"id", hit.id}, {"contents", hit.contents}};
      if (return_scores) {
        list.push_back({{"document", std::move(doc)}, {"score", hit.score}});
      } else {
        list.push_back(std::move(doc));
      }
    }
    result.push_back(std::move(list));
  }
  return {200, {{"result", std::move(result)}}};
}

int RetrievalServer::bind(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = server_->bind_to_any_port(host);
  } else if (!server_->bind_to_port(host, port)) {
    bound = -1;
  }
  STOA_CHECK(bound > 0, ErrorKind::kNetwork, "cannot listen on ", host, ":", port);
  return bound;
}

void RetrievalServer::serve() {
  server_->listen_after_bind();
}

void RetrievalServer::stop() {
  if (server_) server_->stop();
}

}  // namespace stoa::env
