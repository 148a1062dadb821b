#include "roles/hub/server.h"

#include <httplib.h>

#include "core/log.h"
#include "roles/hub/dashboard.h"

namespace stoa::hub {

using nlohmann::json;

namespace {

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(json{{"error", message}}.dump(), "application/json");
}

void send_json(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_content(j.dump(), "application/json");
}

std::string bearer(const httplib::Request& req) {
  std::string h = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (h.size() > prefix.size() && h.compare(0, prefix.size(), prefix) == 0) {
    return h.substr(prefix.size());
  }
  return "";
}

// The operator token: a bearer header, or ?token= (a browser opening the dashboard).
std::string operator_token(const httplib::Request& req) {
  std::string token = bearer(req);
  return token.empty() && req.has_param("token") ? req.get_param_value("token") : token;
}

// Runs a handler, turning every failure into a JSON error: RequestError keeps its status, other
// stoa::Errors about the input are 400, anything unexpected 500 (logged) — never a crash.
template <typename Fn>
void guarded(const httplib::Request& req, httplib::Response& res, Fn&& fn) {
  try {
    fn();
  } catch (const RequestError& e) {
    send_error(res, e.status(), e.what());
    if (e.retry_after_ms() > 0) {  // 429: whole seconds in the header, the exact wait in the body
      res.set_header("Retry-After", std::to_string((e.retry_after_ms() + 999) / 1000));
      res.set_content(json{{"error", e.what()}, {"retry_after_ms", e.retry_after_ms()}}.dump(),
                      "application/json");
    }
  } catch (const Error& e) {
    int status = e.kind() == ErrorKind::kInvalidArgument || e.kind() == ErrorKind::kBadFormat ? 400
                 : e.kind() == ErrorKind::kNotFound                                           ? 404
                                                                                              : 500;
    if (status == 500) log_error("hub", req.method, " ", req.path, ": ", e.what());
    send_error(res, status, e.what());
  } catch (const std::exception& e) {
    log_error("hub", req.method, " ", req.path, ": ", e.what());
    send_error(res, 500, cat("internal error: ", e.what()));
  }
}

std::optional<uint64_t> query_u64(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return std::nullopt;
  std::string v = req.get_param_value(name);
  uint64_t out = 0;
  STOA_CHECK(!v.empty() && v.size() <= 19 && v.find_first_not_of("0123456789") == std::string::npos,
             ErrorKind::kInvalidArgument, "query parameter '", name, "' = '", v.substr(0, 40),
             "' is not a non-negative integer");
  out = std::stoull(v);
  return out;
}

}  // namespace

HubServer::HubServer(Hub& hub, ServerOptions options) : hub_(hub), options_(std::move(options)) {
  tls_ = !options_.tls_cert_path.empty() || !options_.tls_key_path.empty();
  if (tls_) {
    STOA_CHECK(!options_.tls_cert_path.empty() && !options_.tls_key_path.empty(),
               ErrorKind::kInvalidArgument, "hub: TLS needs both a certificate and a key");
    auto ssl = std::make_unique<httplib::SSLServer>(options_.tls_cert_path.c_str(),
                                                    options_.tls_key_path.c_str());
    STOA_CHECK(ssl->is_valid(), ErrorKind::kBadFormat, "hub: cannot load TLS certificate '",
               options_.tls_cert_path, "' / key '", options_.tls_key_path, "'");
    server_ = std::move(ssl);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  int threads = std::max(4, options_.threads);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(options_.max_body_bytes);
  server_->set_read_timeout(30, 0);
  server_->set_write_timeout(300, 0);
  server_->set_keep_alive_timeout(30);
  routes();
}

HubServer::~HubServer() {
  stop();
}

std::string HubServer::url() const {
  return cat(tls_ ? "https://" : "http://", options_.host, ":", port_);
}

void HubServer::start() {
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
    STOA_CHECK(port_ > 0, ErrorKind::kIo, "hub: cannot bind ", options_.host);
  } else {
    STOA_CHECK(server_->bind_to_port(options_.host, options_.port), ErrorKind::kIo,
               "hub: cannot bind ", options_.host, ":", options_.port, " (in use?)");
    port_ = options_.port;
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib 0.11 has no wait_until_ready(): the socket is already bound and listening, so
  // connections queue until the loop runs; wait briefly for is_running() for tidy logs.
  for (int i = 0; i < 200 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  log_info("hub", "serving on ", url());
}

void HubServer::stop() {
  hub_.stop();  // releases long-polls so the pool threads can finish
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HubServer::routes() {
  auto& s = *server_;
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, 500, "internal error");
  });
  // Unknown routes and wrong methods: JSON 404 instead of httplib's empty body.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) {
      std::string msg = res.status == 413 ? "request body too large" : "no such route";
      res.set_content(json{{"error", cat(msg, ": ", req.method, " ", req.path)}}.dump(),
                      "application/json");
    }
  });

  s.Post("/v1/join", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      auto body = net::parse_body(req.body, "join");
      std::string token = bearer(req);
      if (token.empty()) throw RequestError(401, "join: missing Authorization: Bearer <token>");
      send_json(res,
                net::to_json(hub_.join(token, net::join_request_from_json(body), req.remote_addr)));
    });
  });

  s.Get("/v1/version", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      hub_.authenticate(bearer(req));
      auto after = query_u64(req, "after");
      auto timeout = query_u64(req, "timeout").value_or(30);
      timeout = std::min<uint64_t>(timeout, static_cast<uint64_t>(options_.max_long_poll_s));
      auto info = hub_.wait_version(after, std::chrono::seconds(timeout));
      send_json(res, net::to_json(info));
    });
  });

  s.Get(R"(/v1/blobs/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      hub_.authenticate(bearer(req));
      std::string hex = req.matches[1];
      Hash128 hash;
      if (hex.size() != 32 || !Hash128::parse(hex, &hash)) {
        throw RequestError(
            400, cat("blob name '", hex.substr(0, 64), "' is not 32 hex digits (xxh3-128)"));
      }
      if (!hub_.store().contains(hash)) throw RequestError(404, cat("no blob ", hex));
      // get() re-hashes the file: a blob corrupted on the hub's disk is answered 500, never sent.
      auto bytes = hub_.store().get(hash);
      res.set_header("Cache-Control", "public, max-age=31536000, immutable");
      res.set_header("ETag", "\"" + hex + "\"");
      res.set_content(std::string(bytes.begin(), bytes.end()), "application/octet-stream");
    });
  });

  s.Post("/v1/lease", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      auto worker = hub_.authenticate(bearer(req));
      auto m = net::lease_request_from_json(net::parse_body(req.body, "lease"));
      if (m.worker_id != worker) throw RequestError(403, "lease: worker_id is not yours");
      send_json(res, net::to_json(hub_.lease(worker, req.remote_addr)));
    });
  });

  s.Post("/v1/release", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      auto worker = hub_.authenticate(bearer(req));
      auto m = net::release_request_from_json(net::parse_body(req.body, "release"));
      if (m.worker_id != worker) throw RequestError(403, "release: worker_id is not yours");
      hub_.release(worker, m.lease_id);
      send_json(res, json{{"released", m.lease_id}});
    });
  });

  s.Post("/v1/rollouts", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      auto worker = hub_.authenticate(bearer(req));
      auto m = net::rollout_submission_from_json(net::parse_body(req.body, "rollout"));
      auto r = hub_.submit(worker, m, req.remote_addr);
      send_json(res, net::to_json(r), r.status == net::IntakeStatus::kRejected ? 422 : 200);
    });
  });

  s.Post("/v1/heartbeat", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      auto worker = hub_.authenticate(bearer(req));
      auto m = net::heartbeat_from_json(net::parse_body(req.body, "heartbeat"));
      send_json(res, net::to_json(hub_.heartbeat(worker, m)));
    });
  });

  s.Get("/v1/status", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      hub_.check_operator(operator_token(req), is_loopback_host(options_.host));
      send_json(res, hub_.status(query_u64(req, "offset").value_or(0),
                                 query_u64(req, "limit").value_or(100)));
    });
  });

  s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      hub_.check_operator(operator_token(req), is_loopback_host(options_.host));
      res.set_content(hub_.metrics(), "text/plain; version=0.0.4; charset=utf-8");
    });
  });

  s.Get("/", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, [&] {
      hub_.check_operator(operator_token(req), is_loopback_host(options_.host));
      res.set_content(dashboard_html(), "text/html; charset=utf-8");
    });
  });
}

}  // namespace stoa::hub
