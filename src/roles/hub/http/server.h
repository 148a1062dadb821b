// The hub's HTTP(S) front end: maps the routes of docs/protocol.md onto a Hub, on the async
// HTTP server (http_server.h: Boost.Asio/Beast, long-polls parked without a thread, request
// deadlines, connection caps per IP). Request bodies are bounded, every handler is wrapped so
// that bad input becomes a 4xx JSON error and never takes the process down. HTTPS (OpenSSL)
// when a certificate and key are configured. Blobs stream from disk with Range support
// (blob_serving.h).
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "net/validation_protocol.h"
#include "roles/hub/groups/pipeline_groups.h"
#include "roles/hub/http/http_server.h"
#include "roles/hub/http/operator_login.h"
#include "roles/hub/hub.h"
#include "roles/hub/store/blob_serving.h"
#include "roles/hub/store/blob_upload.h"
#include "roles/hub/swarm/swarm_tracker.h"
#include "roles/hub/task_proxy.h"
#include "roles/hub/verification/validation_queue.h"
#include "roles/pipeline/stage_relay.h"

namespace stoa::hub {

// What a replayer (`stoa validate`, or a worker's peer check) is sent for one job
// (validation_routes.cpp): the rollout and everything its replay needs besides the weights.
net::ValidationJob wire_job(const std::string& job_id, const AuditJob& job, int64_t deadline_ms,
                            const HubConfig& config, const HubDeps& deps);
// GET .../catalog: the hub's PULSE catalog, from which a replayer mirrors the blobs it needs.
HttpReply catalog_reply(Hub& hub);

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (see HubServer::port())
  // Request handlers (lease, intake, status); long-polls hold none. A handler that wrote waits
  // for its group commit (ledger_writer.h) on its thread, so several wait at once at N = 1000.
  int threads = 16;
  size_t max_body_bytes = 32u << 20;
  int max_long_poll_s = 60;
  int header_timeout_s = 10;  // whole request headers
  int body_timeout_s = 60;    // whole request body
  int idle_timeout_s = 30;    // keep-alive connection between requests
  size_t max_connections = 16'384;
  size_t max_connections_per_ip = 256;
  std::string tls_cert_path;  // both set: HTTPS
  std::string tls_key_path;
  // The relay for pipeline stages behind NAT (roles/pipeline/stage_relay.h), on the hub's host
  // (0: any free port; docs/protocol.md, "Pipeline groups"). Opened only when a group first
  // places a hop through it: a hub whose groups need no relay listens on no second port.
  int stage_relay_port = 0;
};

class HubServer {
 public:
  HubServer(Hub& hub, ServerOptions options);
  ~HubServer();  // stops
  HubServer(const HubServer&) = delete;
  HubServer& operator=(const HubServer&) = delete;

  // Binds (throws kIo if the port is taken) and serves on background threads.
  void start();
  void stop();
  int port() const { return http_->port(); }
  bool tls() const { return http_->tls(); }
  std::string url() const;
  // Where the operator opens the dashboard: on loopback the page itself (open there); otherwise
  // /login with a fresh one-time code (operator_login.h), so no token is ever in a URL.
  std::string dashboard_url();
  HttpServerStats stats() const { return http_->stats(); }
  double cpu_seconds() const { return http_->cpu_seconds(); }
  // The swarm's tracker and web seed counts (nullopt in a build without a swarm engine).
  std::optional<SwarmTrackerStats> swarm_stats() const {
    return swarm_ ? std::optional(swarm_->stats()) : std::nullopt;
  }
  FetchAllowanceStats fetch_stats() const { return fetches_->stats(); }
  // Serves /v1/validation/* (validation_routes.cpp) from `queue` ([verify] remote); call before
  // start(). `queue` must outlive the server.
  void set_validation_queue(ValidationQueue* queue) { validation_ = queue; }
  // The stage relay's port while it listens; nullopt until a pipeline hop first needs it.
  std::optional<int> stage_relay_port() const;

 private:
  HandlerOutcome route(const RequestContext& request);
  HandlerOutcome long_poll(const RequestContext& request);
  HandlerOutcome validation_route(const RequestContext& request, const std::string& bearer);
  // /v1/checks/* (check_routes.cpp): peer checks leased to workers ([verify] peer).
  HttpReply check_route(const RequestContext& request, const std::string& bearer);
  // /v1/swarm/* (swarm_routes.cpp): torrents, the tracker and the web seed of the swarm.
  HttpReply swarm_route(const RequestContext& request, const std::string& bearer);
  // /v1/trainer/* (trainer_routes.cpp): a trainer away from the hub (HubConfig::serve_trainer).
  HttpReply trainer_route(const RequestContext& request, const std::string& bearer);
  // POST /v1/pipeline/place (pipeline_routes.cpp): a worker's place in a pipeline group.
  HttpReply pipeline_route(const RequestContext& request, const std::string& bearer);
  // The trainer routes serve one trainer: the newest that attached. A call from another one (a
  // trainer left running when its replacement started) is refused with 409, so two trainers
  // never train on one ledger. A hub restarted adopts the first session it hears from.
  void check_trainer_session(const std::string& session, bool attach);

  Hub& hub_;
  ServerOptions options_;
  std::shared_ptr<FetchAllowance> fetches_;  // shared by blobs_, run_files_ and the web seed
  BlobServing blobs_;
  std::unique_ptr<BlobServing> run_files_;  // null when the hub serves no run files
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<OperatorLogin> login_;  // the dashboard's cookie sessions
  ValidationQueue* validation_ = nullptr;
  std::shared_ptr<SwarmTracker> swarm_;  // null in a build without a swarm engine
  // Null when the hub was not given the model. Shared with the hub, which checks a group's
  // rollouts against its signers (Hub::set_pipeline_signers) and may outlive this server.
  std::shared_ptr<PipelineGroups> groups_;
  // Opens the stage relay (once; thread-safe) and returns its port.
  int open_stage_relay();
  mutable std::mutex relay_mutex_;
  // Opened by the first relayed hop placed (open_stage_relay), closed by stop().
  std::unique_ptr<pipeline::StageRelay> stage_relay_;
  TaskProxy tasks_;
  BlobUpload uploads_;
  std::mutex trainer_mutex_;
  std::string trainer_session_;  // guarded by trainer_mutex_
};

}  // namespace stoa::hub
