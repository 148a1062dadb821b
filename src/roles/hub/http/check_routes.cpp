// The peer-check routes (docs/protocol.md, "Peer checks"): a worker with a session leases a
// rollout of another worker to replay (POST /v1/checks/lease), mirrors the PULSE blobs it needs
// (GET /v1/checks/catalog, then GET /v1/blobs/{hash}) and hands in its verdict (POST
// /v1/checks/verdict). The hub chooses the job, never the worker (HubChecks::lease_check); a
// verdict decides nothing on its own: a failure goes on to the hub's trusted replay
// (verification/verification_peer.cpp).
#include "env/dataset.h"
#include "roles/hub/http/server.h"

namespace stoa::hub {

using nlohmann::json;

HttpReply HubServer::check_route(const RequestContext& req, const std::string& token) {
  const std::string& p = req.path;
  const bool get = req.method == "GET", post = req.method == "POST";
  const std::string worker = hub_.access().authenticate(token);
  auto reply = [](const json& j) {
    HttpReply r;
    r.body = j.dump();
    return r;
  };
  if (get && p == "/v1/checks/catalog") {
    if (!hub_.config().verify.peer)
      throw RequestError(404, "this hub runs no peer checks ([verify] peer = false)");
    return catalog_reply(hub_);
  }
  if (post && p == "/v1/checks/lease") {
    // The request names nobody: the job is for the session's worker, chosen by the hub.
    (void)net::parse_body(req.body, "check lease");
    net::ValidationLeaseResponse r;
    if (auto l = hub_.checks().lease_check(worker, req.peer_ip))
      r.job = wire_job(l->job_id, l->job, l->deadline_ms, hub_.config(), hub_.deps());
    r.queued = static_cast<int64_t>(hub_.checks().checks_waiting());
    return reply(net::to_json(r));
  }
  if (post && p == "/v1/checks/verdict") {
    const net::ValidationVerdict v =
        net::validation_verdict_from_json(net::parse_body(req.body, "check verdict"));
    hub_.checks().record_check(worker, v.job_id, audit_verdict(v));
    // The job id the worker holds: the rollout's own id would name its author's choice.
    return reply(json{{"recorded", v.job_id}});
  }
  throw RequestError(404, cat("no such route: ", req.method, " ", p));
}

}  // namespace stoa::hub
