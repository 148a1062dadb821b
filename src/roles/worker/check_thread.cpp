#include "roles/worker/check_thread.h"

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

CheckThread::CheckThread(net::HubClient& hub, verify::ReplayModel model,
                         verify::ReplayTaskMaker make_task, CheckOptions options,
                         const std::atomic<bool>& stop)
    : hub_(hub),
      model_(std::move(model)),
      make_task_(std::move(make_task)),
      options_(std::move(options)) {
  thread_ = std::thread([this, &stop] { run(stop); });
}

void CheckThread::join() {
  if (thread_.joinable()) thread_.join();
}

verify::ReplayJobStats CheckThread::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CheckThread::run(const std::atomic<bool>& stop) {
  CheckSource source(hub_);
  verify::ReplayLoopOptions loop;
  loop.log_tag = "check";
  loop.mirror_dir = options_.mirror_dir;
  loop.threads = options_.threads;
  loop.keep_versions = options_.keep_versions;
  loop.idle_wait_s = options_.idle_wait_s;
  try {
    const verify::ReplayJobStats s = run_replay_jobs(source, model_, make_task_, loop, stop);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_ = s;
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
