#include "roles/verify/remote_validator.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/rng.h"
#include "env/dataset.h"
#include "env/model_codec.h"
#include "env/tasks/builtin_tasks.h"
#include "env/token_codec.h"
#include "model/config.h"
#include "net/hub_client.h"
#include "net/validation_protocol.h"
#include "pulse/catalog.h"
#include "roles/verify/replay_validator.h"

namespace stoa::verify {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What a failed call means for the loop.
[[noreturn]] void refuse_or_throw(const net::HttpResponse& r, const std::string& what) {
  std::string message = r.body;
  try {
    message = json::parse(r.body).value("error", r.body);
  } catch (const json::exception&) {
  }
  if (r.status == 401 || r.status == 403)
    throw ValidatorRefused(r.status,
                           cat(what, ": the hub refused the token (", r.status, "): ", message));
  if (r.status >= 400 && r.status < 500)
    fail(ErrorKind::kInvalidArgument, what, ": the hub answered ", r.status, ": ", message);
  fail(ErrorKind::kNetwork, what, ": the hub answered ", r.status, ": ", message);
}

// The model-side setup a replay needs, built once from the model dir (the worker's rule for the
// codec and the ids it samples from).
struct Setup {
  ModelConfig config;
  std::unique_ptr<env::TokenCodec> codec;
  int64_t sample_vocab = 0;
};

Setup load_setup(const RemoteValidatorOptions& o) {
  STOA_CHECK(!o.model_dir.empty(), ErrorKind::kInvalidArgument,
             "stoa validate: --model DIR (the run's config.json) is required");
  Setup s;
  s.config = load_model_config(o.model_dir + "/config.json");
  env::ModelCodec mc = env::load_model_codec(o.model_dir, s.config, "stoa validate");
  s.codec = std::move(mc.codec);
  s.sample_vocab = mc.sample_vocab;
  return s;
}

// Every version a rollout's replay reads: the prompt's and every generated token's.
std::set<uint64_t> versions_of(const net::ValidationJob& job) {
  const net::RolloutSubmission& r = job.rollout;
  std::set<uint64_t> out;
  for (size_t t = static_cast<size_t>(job.prompt_length); t < r.tokens.size(); ++t)
    if (r.mask[t]) out.insert(r.versions[t]);
  if (r.prompt_version) out.insert(*r.prompt_version);
  return out;
}

class Client {
 public:
  Client(const RemoteValidatorOptions& o)
      : o_(o),
        hub_(o.hub_url, http_options(o)),
        mirror_((fs::path(state_dir(o)) / "blobs").string()) {
    hub_.http().set_bearer_token(o.token);
  }

  std::optional<net::ValidationJob> lease() {
    net::ValidationLeaseRequest req{o_.name, o_.wait_s};
    const auto r = hub_.http().post_json("/v1/validation/lease", net::to_json(req).dump(), false,
                                         std::chrono::seconds(o_.wait_s + 30));
    if (r.status != 200) refuse_or_throw(r, "validation lease");
    return net::validation_lease_response_from_json(json::parse(r.body)).job;
  }

  // 200: recorded; false when the hub refused it because the job had expired or is unknown.
  bool post(const net::ValidationVerdict& v) {
    const auto r = hub_.http().post_json("/v1/validation/verdict", net::to_json(v).dump(), false);
    if (r.status == 200) return true;
    if (r.status == 404 || r.status == 409) {
      log_warn("validate", "verdict on job ", v.job_id, " refused: ", r.body);
      return false;
    }
    refuse_or_throw(r, "verdict");
  }

  void refresh_catalog() {
    const auto r = hub_.http().get("/v1/validation/catalog");
    if (r.status != 200) refuse_or_throw(r, "validation catalog");
    pulse::Catalog::from_json(json::parse(r.body), o_.hub_url + "/v1/validation/catalog")
        .save(mirror_.dir() + "/catalog.json");
  }

  // The worker's download path: the bytes must hash to the name (HubClient::blob checks it).
  void fetch(const pulse::CatalogEntry& e) {
    const std::vector<uint8_t> bytes = hub_.blob(e.hash.hex());
    const Hash128 stored = mirror_.put(bytes);
    STOA_CHECK(stored == e.hash, ErrorKind::kIntegrity, "blob ", e.hash.hex(), " stored as ",
               stored.hex());
    log_info("validate", "fetched ", e.kind == pulse::BlobKind::kAnchor ? "anchor" : "patch",
             " for version ", e.to_version, " (", bytes.size(), " bytes)");
  }

  pulse::BlobStore& mirror() { return mirror_; }

 private:
  static net::HttpClientOptions http_options(const RemoteValidatorOptions& o) {
    net::HttpClientOptions h;
    h.pin_sha256 = o.pin_sha256;
    h.ca_cert_path = o.ca_file;
    return h;
  }
  static std::string state_dir(const RemoteValidatorOptions& o) {
    return o.state_dir.empty() ? ".stoa-validate-" + o.name : o.state_dir;
  }

  const RemoteValidatorOptions& o_;
  net::HubClient hub_;
  pulse::BlobStore mirror_;
};

// The same settings for every lease of a run; rebuilt only if the hub's ever change.
ReplaySettings settings_for(const net::ValidationJob& job, const Setup& s) {
  ReplaySettings rs;
  rs.sampling = job.sampling;
  rs.sample_vocab = s.sample_vocab;
  if (s.config.eos_token_id >= 0) rs.stop_tokens = {static_cast<int32_t>(s.config.eos_token_id)};
  rs.capacity = job.max_tokens;
  return rs;
}

}  // namespace

RemoteValidatorStats run_remote_validator(const RemoteValidatorOptions& o,
                                          const std::atomic<bool>& stop) {
  STOA_CHECK(!o.hub_url.empty(), ErrorKind::kInvalidArgument,
             "stoa validate: --hub URL is required");
  STOA_CHECK(!o.token.empty(), ErrorKind::kInvalidArgument,
             "stoa validate: --token (an operator or validate token of the hub) is required");
  const Setup setup = load_setup(o);
  Client client(o);
  VersionStates states(
      client.mirror(), 3,
      {[&] { client.refresh_catalog(); }, [&](const pulse::CatalogEntry& e) { client.fetch(e); }});
  std::unique_ptr<env::Task> task;  // the validator reads it: destroyed after it
  std::unique_ptr<ReplayValidator> validator;
  std::string validator_key;  // the settings the validator and the task were built with
  RemoteValidatorStats stats;
  Rng jitter(static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()), 7);
  double backoff_s = 0.5;
  auto back_off = [&](const std::string& why) {
    const double wait = backoff_s * (0.5 + jitter.uniform());
    log_warn("validate", why, "; retrying in ", static_cast<int>(wait * 1000), " ms");
    for (double waited = 0; waited < wait && !stop; waited += 0.05)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    backoff_s = std::min(o.max_backoff_s, backoff_s * 2);
  };
  log_info("validate", "validating for ", o.hub_url, " as '", o.name, "'");
  while (!stop && (o.max_jobs == 0 || stats.verdicts < o.max_jobs)) {
    std::optional<net::ValidationJob> job;
    try {
      job = client.lease();
    } catch (const ValidatorRefused&) {
      throw;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kNetwork) throw;  // a 4xx other than auth: a setup problem
      back_off(e.what());
      continue;
    }
    if (!job) continue;
    // The versions first: a blob the validator cannot fetch is its own failure, not the worker's.
    try {
      for (uint64_t v : versions_of(*job)) states.at(v);
    } catch (const ValidatorRefused&) {
      throw;
    } catch (const Error& e) {
      // A version no route reaches any more (pruned on the hub) is what the replay reports as
      // `unreplayable`; anything else (the network, a blob damaged in transfer, a refused
      // token) is the validator's own trouble and must not count against the worker.
      if (e.kind() != ErrorKind::kNotFound) {
        ++stats.abandoned;
        back_off(cat("job ", job->job_id, " left to another validator: ", e.what()));
        continue;
      }
    }
    const ReplaySettings rs = settings_for(*job, setup);
    // The task the hub names, with the run's options and this machine's own (where its tools
    // are); rebuilt only when the hub's settings change.
    const std::string key = net::to_json(job->sampling).dump() + std::to_string(job->max_tokens) +
                            job->task + nlohmann::json(job->task_options).dump();
    if (!validator || key != validator_key) {
      const env::TaskRegistry& tasks = env::builtin_tasks();
      validator.reset();
      task = tasks.make(job->task, tasks.with_local(job->task, env::TaskOptions(job->task_options),
                                                    o.task_options));
      validator = std::make_unique<ReplayValidator>(setup.config, *task, *setup.codec, rs, states,
                                                    o.threads);
      validator_key = key;
    }
    const Verdict v = validator->check(job->rollout, env::qa_item_from_json(job->problem),
                                       static_cast<size_t>(job->prompt_length));
    net::ValidationVerdict out;
    out.job_id = job->job_id;
    out.pass = v.pass;
    out.position = v.position;
    out.what = v.what;
    out.detail = v.detail.substr(0, net::kMaxVerdictDetail);
    out.cpu_seconds = v.cpu_seconds;
    stats.cpu_seconds += v.cpu_seconds;
    if (!v.pass)
      log_warn("validate", "rollout ", job->rollout.id, " of worker ", job->rollout.worker_id,
               " FAILED replay at position ", v.position, " (", v.what, "): ", v.detail);
    // A lost verdict is re-sent; a second copy of one the hub recorded is answered 404.
    for (int attempt = 0;; ++attempt) {
      try {
        if (client.post(out)) {
          ++stats.verdicts;
          ++(v.pass ? stats.passed : stats.failed);
        } else {
          ++stats.refused;
        }
        backoff_s = 0.5;
        break;
      } catch (const ValidatorRefused&) {
        throw;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kNetwork || attempt >= 4 || stop) throw;
        back_off(cat("posting the verdict on job ", job->job_id, ": ", e.what()));
      }
    }
  }
  log_info("validate", "stopping: ", stats.verdicts, " verdicts (", stats.passed, " pass, ",
           stats.failed, " fail), ", stats.refused, " refused, ", stats.cpu_seconds,
           " CPU-s replaying");
  return stats;
}

}  // namespace stoa::verify
