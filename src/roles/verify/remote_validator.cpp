#include "roles/verify/remote_validator.h"

#include <chrono>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "engine/arithmetic.h"
#include "env/model_codec.h"
#include "env/tasks/builtin_tasks.h"
#include "model/config.h"
#include "net/hub_client.h"

namespace stoa::verify {
namespace {

using nlohmann::json;

// The validation routes (docs/protocol.md, "Validation"), with an operator or validate token.
class ValidationSource final : public ReplayJobSource {
 public:
  explicit ValidationSource(const RemoteValidatorOptions& o)
      : o_(o), hub_(o.hub_url, http_options(o)) {
    hub_.http().set_bearer_token(o.token);
  }

  std::optional<net::ValidationJob> lease() override {
    net::ValidationLeaseRequest req{o_.name, o_.wait_s, engine::kArithmetic};
    const auto r = hub_.http().post_json("/v1/validation/lease", net::to_json(req).dump(), false,
                                         std::chrono::seconds(o_.wait_s + 30));
    if (r.status != 200) refuse_or_throw(r.status, r.body, "validation lease");
    return net::validation_lease_response_from_json(json::parse(r.body)).job;
  }

  bool post(const net::ValidationVerdict& v) override {
    const auto r = hub_.http().post_json("/v1/validation/verdict", net::to_json(v).dump(), false);
    if (r.status == 200) return true;
    if (r.status == 404 || r.status == 409) {
      log_warn("validate", "verdict on job ", v.job_id, " refused: ", r.body);
      return false;
    }
    refuse_or_throw(r.status, r.body, "verdict");
  }

  json catalog() override {
    const auto r = hub_.http().get("/v1/validation/catalog");
    if (r.status != 200) refuse_or_throw(r.status, r.body, "validation catalog");
    return json::parse(r.body);
  }

  std::vector<uint8_t> blob(const std::string& hash_hex) override { return hub_.blob(hash_hex); }

 private:
  static net::HttpClientOptions http_options(const RemoteValidatorOptions& o) {
    net::HttpClientOptions h;
    h.pin_sha256 = o.pin_sha256;
    h.ca_cert_path = o.ca_file;
    return h;
  }

  const RemoteValidatorOptions& o_;
  net::HubClient hub_;
};

}  // namespace

RemoteValidatorStats run_remote_validator(const RemoteValidatorOptions& o,
                                          const std::atomic<bool>& stop) {
  STOA_CHECK(!o.hub_url.empty(), ErrorKind::kInvalidArgument,
             "stoa validate: --hub URL is required");
  STOA_CHECK(!o.token.empty(), ErrorKind::kInvalidArgument,
             "stoa validate: --token (an operator or validate token of the hub) is required");
  STOA_CHECK(!o.model_dir.empty(), ErrorKind::kInvalidArgument,
             "stoa validate: --model DIR (the run's config.json) is required");
  // The model-side setup, built once from the model dir (the worker's rule for the codec and the
  // ids it samples from).
  ReplayModel model;
  model.config = load_model_config(o.model_dir + "/config.json");
  env::ModelCodec mc = env::load_model_codec(o.model_dir, model.config, "stoa validate");
  model.codec = mc.codec.get();
  model.sample_vocab = mc.sample_vocab;
  ValidationSource source(o);
  // The task the hub names, with the run's options and this machine's own (where its tools are).
  auto make_task = [&o](const net::ValidationJob& job) {
    const env::TaskRegistry& tasks = env::builtin_tasks();
    return tasks.make(
        job.task, tasks.with_local(job.task, env::TaskOptions(job.task_options), o.task_options));
  };
  ReplayLoopOptions loop;
  loop.log_tag = "validate";
  loop.mirror_dir = o.state_dir.empty() ? ".stoa-validate-" + o.name : o.state_dir;
  loop.threads = o.threads;
  loop.backend = o.backend;
  loop.max_jobs = o.max_jobs;
  loop.max_backoff_s = o.max_backoff_s;
  log_info("validate", "validating for ", o.hub_url, " as '", o.name, "'");
  const RemoteValidatorStats stats = run_replay_jobs(source, model, make_task, loop, stop);
  log_info("validate", "stopping: ", stats.verdicts, " verdicts (", stats.passed, " pass, ",
           stats.failed, " fail), ", stats.refused, " refused, ", stats.cpu_seconds,
           " CPU-s replaying");
  return stats;
}

}  // namespace stoa::verify
