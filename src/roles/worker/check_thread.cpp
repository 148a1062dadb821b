#include "roles/worker/check_thread.h"

#include <atomic>
#include <nlohmann/json.hpp>

#include "core/log.h"

namespace stoa::worker {
namespace {

using nlohmann::json;

// The peer-check routes as this worker's session (docs/protocol.md, "Peer checks").
class CheckSource final : public verify::ReplayJobSource {
 public:
  explicit CheckSource(net::HubClient& hub) : hub_(hub) {}

  std::optional<net::ValidationJob> lease() override {
    const auto r = hub_.session_post("/v1/checks/lease", "{}", false);
    if (r.status != 200) verify::refuse_or_throw(r.status, r.body, "check lease");
    return net::validation_lease_response_from_json(json::parse(r.body)).job;
  }

  bool post(const net::ValidationVerdict& v) override {
    const auto r = hub_.session_post("/v1/checks/verdict", net::to_json(v).dump(), false);
    if (r.status == 200) return true;
    if (r.status == 404 || r.status == 409) {
      log_warn("check", "verdict on check ", v.job_id, " refused: ", r.body);
      return false;
    }
    verify::refuse_or_throw(r.status, r.body, "check verdict");
  }

  json catalog() override {
    const auto r = hub_.session_get("/v1/checks/catalog");
    if (r.status != 200) verify::refuse_or_throw(r.status, r.body, "check catalog");
    return json::parse(r.body);
  }

  std::vector<uint8_t> blob(const std::string& hash_hex) override { return hub_.blob(hash_hex); }

 private:
  net::HubClient& hub_;
};

}  // namespace

void run_peer_checks(net::HubClient& hub, const verify::ReplayModel& model,
                     const verify::ReplayTaskMaker& make_task, const CheckOptions& options,
                     std::stop_token stop) {
  // The replay loop (roles/verify) watches a flag of its own.
  std::atomic<bool> stopping{false};
  const std::stop_callback raise_on_stop(stop, [&stopping] { stopping = true; });
  CheckSource source(hub);
  verify::ReplayLoopOptions loop;
  loop.log_tag = "check";
  loop.failures_are_routine = true;
  loop.mirror_dir = options.mirror_dir;
  loop.threads = options.threads;
  loop.keep_versions = options.keep_versions;
  loop.idle_wait_s = options.idle_wait_s;
  try {
    const verify::ReplayJobStats s = run_replay_jobs(source, model, make_task, loop, stopping);
    log_info("check", "stopped: ", s.verdicts, " checks (", s.passed, " pass, ", s.failed,
             " fail), ", s.cpu_seconds, " CPU-s replaying");
  } catch (const verify::ReplayerRefused& e) {
    log_warn("check", "checking stopped: ", e.what());
  } catch (const Error& e) {
    // A hub without peer checks answers the lease 404: nothing is wrong, there is nothing to do.
    if (e.kind() == ErrorKind::kNotFound)
      log_info("check", "the hub runs no peer checks");
    else
      log_warn("check", "checking stopped: ", e.what());
  } catch (const std::exception& e) {
    log_warn("check", "checking stopped: ", e.what());
  }
}

}  // namespace stoa::worker
