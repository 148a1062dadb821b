// The validation routes (docs/protocol.md, "Validation"): trusted `stoa validate` processes lease
// replay jobs from the hub's ValidationQueue, fetch the PULSE catalog and blobs they need, and
// hand in verdicts, which the hub records exactly as the in-process validator's
// (HubChecks::record_verdict: a failure quarantines the worker). Every route needs a token of scope
// `operator` or `validate` (HubAccess::check_validator), even on loopback.
#include <filesystem>

#include "engine/arithmetic.h"
#include "env/dataset.h"
#include "pulse/catalog.h"
#include "roles/hub/http/server.h"

namespace stoa::hub {

using nlohmann::json;

namespace {

HttpReply reply(const json& j, int status = 200) {
  HttpReply r;
  r.status = status;
  r.body = j.dump();
  return r;
}

}  // namespace

net::ValidationJob wire_job(const std::string& job_id, const AuditJob& job, int64_t deadline_ms,
                            const HubConfig& config, const HubDeps& deps) {
  net::ValidationJob j;
  j.job_id = job_id;
  j.rollout = job.rollout;
  j.problem = env::to_json(job.problem);
  j.prompt_length = static_cast<int64_t>(job.prompt_length);
  j.sampling = config.sampling;
  j.max_tokens = config.max_tokens;
  j.deadline_ms = deadline_ms;
  j.task = deps.task->name();
  j.task_options = deps.task_options.values();
  return j;
}

HttpReply catalog_reply(Hub& hub) {
  // The PULSE catalog: which blobs rebuild which version (a replayer mirrors what it needs).
  const std::string path = hub.store().dir() + "/catalog.json";
  if (!std::filesystem::exists(path)) return reply(pulse::Catalog().to_json());
  return reply(pulse::Catalog::load(path).to_json());
}

HandlerOutcome HubServer::validation_route(const RequestContext& req, const std::string& token) {
  const std::string& p = req.path;
  const bool get = req.method == "GET", post = req.method == "POST";
  hub_.access().check_validator(token);
  if (!validation_)
    throw RequestError(404, "this hub has no remote validation ([verify] remote = false)");
  if (get && p == "/v1/validation/catalog") return catalog_reply(hub_);
  if (post && p == "/v1/validation/lease") {
    const net::ValidationLeaseRequest m =
        net::validation_lease_request_from_json(net::parse_body(req.body, "validation lease"));
    if (m.arithmetic != engine::kArithmetic)
      throw RequestError(409, engine::arithmetic_refusal("validator", m.arithmetic));
    const HubConfig& config = hub_.config();
    auto answer = [this, &config](const std::optional<ValidationQueue::Leased>& l) {
      net::ValidationLeaseResponse r;
      if (l) r.job = wire_job(l->job_id, l->job, l->deadline_ms, config, hub_.deps());
      r.queued = static_cast<int64_t>(validation_->stats().queued);
      return reply(net::to_json(r));
    };
    auto leased = validation_->lease(m.validator, std::chrono::milliseconds(0));
    const int64_t wait_s = std::min<int64_t>(m.wait_s, options_.max_long_poll_s);
    if (leased || wait_s == 0) return answer(leased);
    // Nothing queued: the connection waits without a thread until a job is queued or wait_s.
    ParkedRequest parked;
    parked.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
    parked.resume = [this, answer,
                     validator = m.validator](bool expired) -> std::optional<HttpReply> {
      auto l = validation_->lease(validator, std::chrono::milliseconds(0));
      if (!l && !expired) return std::nullopt;
      return answer(l);
    };
    return parked;
  }
  if (post && p == "/v1/validation/verdict") {
    const net::ValidationVerdict v =
        net::validation_verdict_from_json(net::parse_body(req.body, "verdict"));
    const ValidationQueue::Completion c = validation_->complete(v.job_id);
    using Status = ValidationQueue::Completion::Status;
    if (c.status == Status::kUnknown)
      throw RequestError(404, cat("verdict: no validation job '", v.job_id.substr(0, 64),
                                  "' is leased (never issued, or already answered)"));
    if (c.status == Status::kExpired)
      throw RequestError(409, cat("verdict: validation job '", v.job_id.substr(0, 64),
                                  "' expired before its verdict and went back to the queue"));
    hub_.checks().record_verdict(c.rollout_id, audit_verdict(v));
    return reply(json{{"recorded", c.rollout_id}});
  }
  throw RequestError(404, cat("no such route: ", req.method, " ", p));
}

}  // namespace stoa::hub
