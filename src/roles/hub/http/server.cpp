#include "roles/hub/http/server.h"

#include "core/log.h"
#include "net/task_protocol.h"
#include "roles/hub/observe/dashboard.h"

namespace stoa::hub {

using nlohmann::json;

namespace {

HttpReply error_reply(int status, const std::string& message) {
  HttpReply r;
  r.status = status;
  r.body = json{{"error", message}}.dump();
  return r;
}

HttpReply json_reply(const json& j, int status = 200) {
  HttpReply r;
  r.status = status;
  r.body = j.dump();
  return r;
}

std::string bearer(const RequestContext& req) {
  std::string h = req.header("authorization");
  const std::string prefix = "Bearer ";
  if (h.size() > prefix.size() && h.compare(0, prefix.size(), prefix) == 0) {
    return h.substr(prefix.size());
  }
  return "";
}

// Runs a handler, turning every failure into a JSON error: RequestError keeps its status, other
// stoa::Errors about the input are 400, anything unexpected 500 (logged) — never a crash.
template <typename Fn>
auto guarded(const RequestContext& req, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const RequestError& e) {
    HttpReply r = error_reply(e.status(), e.what());
    if (e.retry_after_ms() > 0) {  // 429: whole seconds in the header, the exact wait in the body
      r.headers.emplace_back("Retry-After", std::to_string((e.retry_after_ms() + 999) / 1000));
      r.body = json{{"error", e.what()}, {"retry_after_ms", e.retry_after_ms()}}.dump();
    }
    return r;
  } catch (const Error& e) {
    int status = e.kind() == ErrorKind::kInvalidArgument || e.kind() == ErrorKind::kBadFormat ? 400
                 : e.kind() == ErrorKind::kNotFound                                           ? 404
                                                                                              : 500;
    if (status == 500) log_error("hub", req.method, " ", req.path, ": ", e.what());
    return error_reply(status, e.what());
  } catch (const std::exception& e) {
    log_error("hub", req.method, " ", req.path, ": ", e.what());
    return error_reply(500, cat("internal error: ", e.what()));
  }
}

std::optional<uint64_t> query_u64(const RequestContext& req, const char* name) {
  auto it = req.query.find(name);
  if (it == req.query.end()) return std::nullopt;
  const std::string& v = it->second;
  STOA_CHECK(!v.empty() && v.size() <= 19 && v.find_first_not_of("0123456789") == std::string::npos,
             ErrorKind::kInvalidArgument, "query parameter '", name, "' = '", v.substr(0, 40),
             "' is not a non-negative integer");
  return std::stoull(v);
}

}  // namespace

HubServer::HubServer(Hub& hub, ServerOptions options)
    : hub_(hub),
      options_(std::move(options)),
      fetches_(std::make_shared<FetchAllowance>(FetchAllowanceOptions{
          hub.config().fetches_per_blob, std::chrono::seconds(hub.config().fetch_refill_s)})),
      blobs_(hub.store(), fetches_),
      tasks_(hub, hub.config().limits.task_per_worker),
      uploads_(hub.store()) {
  if (hub.config().swarm && net::swarm::available())
    swarm_ = std::make_shared<SwarmTracker>(
        hub.store(),
        [&hub](const std::string& worker) { return !hub.checks().quarantined(worker); },
        SwarmTrackerOptions{hub.config().swarm_web_seed_copies, hub.config().swarm_web_seed_budget,
                            std::chrono::seconds(hub.config().swarm_reseed_after_s)});
  if (hub.run_files_store())
    run_files_ = std::make_unique<BlobServing>(*hub.run_files_store(), fetches_);
  if (hub.deps().model) {
    groups_ = std::make_shared<PipelineGroups>(*hub.deps().model);
    hub.set_pipeline_signers([groups = groups_](uint64_t id) { return groups->signers(id); });
  }
  HttpServerOptions o;
  o.host = options_.host;
  o.port = options_.port;
  o.handler_threads = std::max(1, options_.threads);
  o.max_body_bytes = options_.max_body_bytes;
  o.header_timeout = std::chrono::seconds(options_.header_timeout_s);
  o.body_timeout = std::chrono::seconds(options_.body_timeout_s);
  o.idle_timeout = std::chrono::seconds(options_.idle_timeout_s);
  o.max_connections = options_.max_connections;
  o.max_connections_per_ip = options_.max_connections_per_ip;
  o.tls_cert_path = options_.tls_cert_path;
  o.tls_key_path = options_.tls_key_path;
  http_ = std::make_unique<HttpServer>(o, [this](const RequestContext& r) { return route(r); });
  OperatorLoginOptions lo;
  lo.secure_cookie = http_->tls();
  login_ = std::make_unique<OperatorLogin>(lo);
}

HubServer::~HubServer() {
  stop();
}

std::string HubServer::url() const {
  return cat(tls() ? "https://" : "http://", options_.host, ":", port());
}

std::string HubServer::dashboard_url() {
  if (is_loopback_host(options_.host)) return url() + "/";
  return cat(url(), "/login?code=", login_->issue_code());
}

void HubServer::start() {
  hub_.set_version_listener(http_->waker());
  if (validation_) validation_->set_listener(http_->waker());
  http_->start();
  log_info("hub", "serving on ", url());
}

int HubServer::open_stage_relay() {
  std::lock_guard<std::mutex> lock(relay_mutex_);
  if (!stage_relay_) {
    pipeline::StageRelayOptions ro;
    ro.listen_host = options_.host;
    ro.listen_port = options_.stage_relay_port;
    stage_relay_ = std::make_unique<pipeline::StageRelay>(ro);
    log_info("hub", "a pipeline group has a stage behind NAT: its hops are relayed on port ",
             stage_relay_->port(), " (a firewall must let it in; [hub] stage_relay_port)");
  }
  return stage_relay_->port();
}

std::optional<int> HubServer::stage_relay_port() const {
  std::lock_guard<std::mutex> lock(relay_mutex_);
  return stage_relay_ ? std::optional<int>(stage_relay_->port()) : std::nullopt;
}

void HubServer::stop() {
  hub_.set_version_listener(nullptr);
  if (validation_) validation_->set_listener(nullptr);
  hub_.stop();
  http_->stop();
  std::lock_guard<std::mutex> lock(relay_mutex_);
  if (stage_relay_) stage_relay_->stop();
}

HandlerOutcome HubServer::long_poll(const RequestContext& req) {
  hub_.access().authenticate(bearer(req));
  auto after = query_u64(req, "after");
  auto timeout = query_u64(req, "timeout").value_or(30);
  timeout = std::min<uint64_t>(timeout, static_cast<uint64_t>(options_.max_long_poll_s));
  auto newer = [after](const net::VersionInfo& info) {
    return !after || (info.version && *info.version > *after);
  };
  auto info = hub_.version_info(after);
  if (timeout == 0 || newer(info)) return json_reply(net::to_json(info));
  // Nothing newer yet: the connection waits without a thread until a publish or the timeout.
  ParkedRequest parked;
  parked.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  parked.resume = [this, req, after, newer](bool expired) -> std::optional<HttpReply> {
    return guarded(req, [&]() -> std::optional<HttpReply> {
      auto now = hub_.version_info(after);
      if (!expired && !newer(now)) return std::nullopt;
      return json_reply(net::to_json(now));
    });
  };
  return parked;
}

HandlerOutcome HubServer::route(const RequestContext& req) {
  const std::string& p = req.path;
  const bool get = req.method == "GET", post = req.method == "POST";
  if (get && p == "/v1/version") {
    return guarded(req, [&]() -> HandlerOutcome { return long_poll(req); });
  }
  if (p.rfind("/v1/validation/", 0) == 0)
    return guarded(req, [&]() -> HandlerOutcome { return validation_route(req, bearer(req)); });
  if (p.rfind("/v1/checks/", 0) == 0)
    return guarded(req, [&]() -> HttpReply { return check_route(req, bearer(req)); });
  if (p.rfind("/v1/swarm/", 0) == 0)
    return guarded(req, [&]() -> HttpReply { return swarm_route(req, bearer(req)); });
  if (p.rfind("/v1/pipeline/", 0) == 0)
    return guarded(req, [&]() -> HttpReply { return pipeline_route(req, bearer(req)); });
  if (p.rfind("/v1/trainer/", 0) == 0)
    return guarded(req, [&]() -> HandlerOutcome { return trainer_route(req, bearer(req)); });
  return guarded(req, [&]() -> HttpReply {
    if (post && p == "/v1/join") {
      auto body = net::parse_body(req.body, "join");
      std::string token = bearer(req);
      if (token.empty()) throw RequestError(401, "join: missing Authorization: Bearer <token>");
      return json_reply(
          net::to_json(hub_.join(token, net::join_request_from_json(body), req.peer_ip)));
    }
    // GET /v1/blobs/{hash} (PULSE anchors and patches) and GET /v1/files/{hash} (the run's model
    // files): streamed from disk; a blob corrupted on the hub's disk is answered 500, never sent.
    for (const char* prefix : {"/v1/blobs/", "/v1/files/"}) {
      const std::string blob_prefix = prefix;
      if (!get || p.compare(0, blob_prefix.size(), blob_prefix) != 0 ||
          p.size() <= blob_prefix.size() || p.find('/', blob_prefix.size()) != std::string::npos)
        continue;
      std::string worker;  // stays empty for a validator: trusted, not charged
      if (!hub_.access().is_validator(bearer(req)))
        worker = hub_.access().authenticate(bearer(req));
      std::string hex = p.substr(blob_prefix.size());
      Hash128 hash;
      if (hex.size() != 32 || !Hash128::parse(hex, &hash)) {
        throw RequestError(
            400, cat("blob name '", hex.substr(0, 64), "' is not 32 hex digits (xxh3-128)"));
      }
      if (blob_prefix == "/v1/blobs/") return blobs_.serve(hash, req, worker);
      if (!run_files_) throw RequestError(404, "this hub serves no run files");
      return run_files_->serve(hash, req, worker);
    }
    if (post && p == "/v1/lease") {
      auto worker = hub_.access().authenticate(bearer(req));
      auto m = net::lease_request_from_json(net::parse_body(req.body, "lease"));
      if (m.worker_id != worker) throw RequestError(403, "lease: worker_id is not yours");
      return json_reply(net::to_json(hub_.lease(worker, req.peer_ip)));
    }
    if (post && p == "/v1/release") {
      auto worker = hub_.access().authenticate(bearer(req));
      auto m = net::release_request_from_json(net::parse_body(req.body, "release"));
      if (m.worker_id != worker) throw RequestError(403, "release: worker_id is not yours");
      hub_.release(worker, m.lease_id);
      return json_reply(json{{"released", m.lease_id}});
    }
    if (post && p == "/v1/rollouts") {
      auto worker = hub_.access().authenticate(bearer(req));
      auto m = net::rollout_submission_from_json(net::parse_body(req.body, "rollout"));
      auto r = hub_.submit(worker, m, req.peer_ip);
      return json_reply(net::to_json(r), r.status == net::IntakeStatus::kRejected ? 422 : 200);
    }
    if (post && p == "/v1/task/prompt") {
      auto worker = hub_.access().authenticate(bearer(req));
      auto m = net::task_prompt_request_from_json(net::parse_body(req.body, "task prompt"));
      return json_reply(json{{"prompt", tasks_.prompt(worker, m)}});
    }
    if (post && p == "/v1/task/step") {
      auto worker = hub_.access().authenticate(bearer(req));
      auto m = net::task_step_request_from_json(net::parse_body(req.body, "task step"));
      return json_reply(net::to_json(tasks_.step(worker, m)));
    }
    if (post && p == "/v1/heartbeat") {
      auto worker = hub_.access().authenticate(bearer(req));
      auto m = net::heartbeat_from_json(net::parse_body(req.body, "heartbeat"));
      return json_reply(net::to_json(hub_.heartbeat(worker, m)));
    }
    // The operator's pages: a bearer header (scripts, `stoa status`) or the browser's session
    // cookie from /login — never a token in the URL (operator_login.h).
    const bool loopback = is_loopback_host(options_.host);
    if ((get || post) && p == "/login")
      return login_->login(req, [&](const std::string& token) {
        try {
          hub_.access().check_operator(token, false);
          return true;
        } catch (const RequestError&) {
          return false;
        }
      });
    const bool operator_route =
        get && (p == "/v1/status" || p == "/v1/history" || p == "/metrics" || p == "/");
    if (operator_route && !login_->has_session(req)) {
      if (p == "/" && !loopback && bearer(req).empty())
        return OperatorLogin::login_page(401, "Log in to see this hub's dashboard.");
      hub_.access().check_operator(bearer(req), loopback);
    }
    if (get && p == "/v1/status") {
      json status =
          hub_.status(query_u64(req, "offset").value_or(0), query_u64(req, "limit").value_or(100));
      if (groups_)
        status["pipeline_groups"] = {
            {"groups", groups_->groups()},        {"waiting", groups_->waiting()},
            {"formed", groups_->groups_formed()}, {"dissolved", groups_->groups_dissolved()},
            {"broken", groups_->groups_broken()}, {"benched", groups_->benched(hub_.now_ms())}};
      if (swarm_) {
        const SwarmTrackerStats s = swarm_->stats();
        status["swarm"] = {{"torrents", s.torrents},
                           {"peers", s.peers},
                           {"seeds", s.seeds},
                           {"announces", s.announces},
                           {"web_seed_ranges", s.web_seed_ranges},
                           {"web_seed_bytes", s.web_seed_bytes},
                           {"web_seed_resent_bytes", s.web_seed_resent_bytes},
                           {"web_seed_cut_bytes", s.web_seed_cut_bytes},
                           {"web_seed_refusals", s.web_seed_refusals}};
      }
      const FetchAllowanceStats f = fetches_->stats();
      status["fetch_allowance"] = {
          {"refusals", f.refusals}, {"refused_bytes", f.refused_bytes}, {"buckets", f.buckets}};
      return json_reply(status);
    }
    if (get && p == "/v1/history") {
      // Absent or -1 (the page's first ask): everything kept.
      auto since = [&](const char* key) -> int64_t {
        if (req.query.count(key) && req.query.at(key) == "-1") return -1;
        const auto v = query_u64(req, key);
        return v ? static_cast<int64_t>(std::min<uint64_t>(*v, INT64_MAX)) : -1;
      };
      return json_reply(hub_.history(since("since_step"), since("since_version")));
    }
    if (get && p == "/metrics") {
      HttpReply r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = hub_.metrics();
      return r;
    }
    if (get && p == "/") {
      HttpReply r;
      r.content_type = "text/html; charset=utf-8";
      r.body = dashboard_html();
      return r;
    }
    return error_reply(404, cat("no such route: ", req.method, " ", p));
  });
}

}  // namespace stoa::hub
