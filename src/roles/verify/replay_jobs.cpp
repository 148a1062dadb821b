#include "roles/verify/replay_jobs.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "core/log.h"
#include "core/rng.h"
#include "engine/arithmetic.h"
#include "env/dataset.h"
#include "pulse/blob_store.h"
#include "pulse/catalog.h"
#include "roles/verify/replay_validator.h"
#include "roles/verify/version_states.h"

namespace stoa::verify {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Every version a rollout's replay reads: the prompt's and every generated token's.
std::set<uint64_t> versions_of(const net::ValidationJob& job) {
  const net::RolloutSubmission& r = job.rollout;
  std::set<uint64_t> out;
  for (size_t t = static_cast<size_t>(job.prompt_length); t < r.tokens.size(); ++t)
    if (r.mask[t]) out.insert(r.versions[t]);
  if (r.prompt_version) out.insert(*r.prompt_version);
  return out;
}

// The same settings for every lease of a run; rebuilt only if the hub's ever change.
ReplaySettings settings_for(const net::ValidationJob& job, const ReplayModel& m) {
  ReplaySettings rs;
  rs.sampling = job.sampling;
  rs.sample_vocab = m.sample_vocab;
  if (m.config.eos_token_id >= 0) rs.stop_tokens = {static_cast<int32_t>(m.config.eos_token_id)};
  rs.capacity = job.max_tokens;
  return rs;
}

}  // namespace

void refuse_or_throw(int status, const std::string& body, const std::string& what) {
  std::string message = body;
  try {
    message = json::parse(body).value("error", body);
  } catch (const json::exception&) {
  }
  if (status == 401 || status == 403)
    throw ReplayerRefused(status,
                          cat(what, ": the hub refused the token (", status, "): ", message));
  if (status == 404)
    throw Error(ErrorKind::kNotFound, cat(what, ": the hub answered 404: ", message));
  if (status >= 400 && status < 500)
    fail(ErrorKind::kInvalidArgument, what, ": the hub answered ", status, ": ", message);
  fail(ErrorKind::kNetwork, what, ": the hub answered ", status, ": ", message);
}

ReplayJobStats run_replay_jobs(ReplayJobSource& source, const ReplayModel& model,
                               const ReplayTaskMaker& make_task, const ReplayLoopOptions& o,
                               const std::atomic<bool>& stop) {
  STOA_CHECK(model.codec, ErrorKind::kInvalidArgument, o.log_tag, ": no token codec");
  pulse::BlobStore mirror((fs::path(o.mirror_dir) / "blobs").string());
  // The mirror holds what the hub's catalog holds and no more: blobs the hub pruned go here too,
  // so a long run does not fill a volunteer's disk with old anchors.
  auto refresh_catalog = [&] {
    const pulse::Catalog catalog = pulse::Catalog::from_json(source.catalog(), "the hub's catalog");
    catalog.save(mirror.dir() + "/catalog.json");
    const std::vector<Hash128> dropped = mirror.prune(catalog.hashes());
    if (!dropped.empty())
      log_info(o.log_tag, "pruned ", dropped.size(), " blobs the hub no longer lists");
  };
  // The worker's download path: the bytes must hash to the name.
  auto fetch = [&](const pulse::CatalogEntry& e) {
    const std::vector<uint8_t> bytes = source.blob(e.hash.hex());
    const Hash128 stored = mirror.put(bytes);
    STOA_CHECK(stored == e.hash, ErrorKind::kIntegrity, "blob ", e.hash.hex(), " stored as ",
               stored.hex());
    log_info(o.log_tag, "fetched ", e.kind == pulse::BlobKind::kAnchor ? "anchor" : "patch",
             " for version ", e.to_version, " (", bytes.size(), " bytes)");
  };
  VersionStates states(mirror, std::max<size_t>(1, o.keep_versions - 1), {refresh_catalog, fetch});
  std::unique_ptr<env::Task> task;  // the validator reads it: destroyed after it
  std::unique_ptr<ReplayValidator> validator;
  std::string validator_key;  // the settings the validator and the task were built with
  ReplayJobStats stats;
  Rng jitter(static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()), 7);
  double backoff_s = 0.5;
  auto sleep_for = [&](double seconds) {
    for (double waited = 0; waited < seconds && !stop; waited += 0.05)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  };
  auto back_off = [&](const std::string& why) {
    const double wait = backoff_s * (0.5 + jitter.uniform());
    log_warn(o.log_tag, why, "; retrying in ", static_cast<int>(wait * 1000), " ms");
    sleep_for(wait);
    backoff_s = std::min(o.max_backoff_s, backoff_s * 2);
  };
  while (!stop && (o.max_jobs == 0 || stats.verdicts < o.max_jobs)) {
    std::optional<net::ValidationJob> job;
    try {
      job = source.lease();
    } catch (const ReplayerRefused&) {
      throw;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kNetwork) throw;  // a 4xx: a setup problem (404: no such jobs)
      back_off(e.what());
      continue;
    }
    if (!job) {
      sleep_for(o.idle_wait_s);
      continue;
    }
    // Bits of two formulas are never compared: a job computed with another engine arithmetic
    // comes from a hub of another build, and judging it would only fail the worker.
    engine::require_hub_arithmetic(job->rollout.arithmetic, "replayer");
    // The versions first: a blob that cannot be fetched is the replayer's own failure, not the
    // worker's.
    try {
      for (uint64_t v : versions_of(*job)) states.at(v);
    } catch (const ReplayerRefused&) {
      throw;
    } catch (const Error& e) {
      // A version no route reaches any more (pruned on the hub) is what the replay reports as
      // `unreplayable`; anything else (the network, a blob damaged in transfer, a refused
      // token) is the replayer's own trouble and must not count against the worker.
      if (e.kind() != ErrorKind::kNotFound) {
        ++stats.abandoned;
        back_off(cat("job ", job->job_id, " left to another replayer: ", e.what()));
        continue;
      }
    }
    ReplaySettings rs = settings_for(*job, model);
    rs.backend = o.backend;
    // The task the hub names, with the run's options and this machine's own; rebuilt only when
    // the hub's settings change.
    const std::string key = net::to_json(job->sampling).dump() + std::to_string(job->max_tokens) +
                            job->task + nlohmann::json(job->task_options).dump();
    if (!validator || key != validator_key) {
      validator.reset();
      task = make_task(*job);
      validator = std::make_unique<ReplayValidator>(model.config, *task, *model.codec, rs, states,
                                                    o.threads, o.keep_versions);
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
    out.blame_stage = v.blame_stage;
    stats.cpu_seconds += v.cpu_seconds;
    if (!v.pass && o.failures_are_routine)
      log_info(o.log_tag, "check ", job->job_id, ": the rollout did not reproduce at position ",
               v.position, " (", v.what,
               "); the hub gets the verdict and judges it (some "
               "checks are canaries made to fail on purpose): ",
               v.detail);
    else if (!v.pass)
      log_warn(o.log_tag, "rollout ", job->rollout.id, " of worker ", job->rollout.worker_id,
               " FAILED replay at position ", v.position, " (", v.what, "): ", v.detail);
    // A lost verdict is re-sent; a second copy of one the hub recorded is answered 404.
    for (int attempt = 0;; ++attempt) {
      try {
        if (source.post(out)) {
          ++stats.verdicts;
          ++(v.pass ? stats.passed : stats.failed);
        } else {
          ++stats.refused;
        }
        backoff_s = 0.5;
        break;
      } catch (const ReplayerRefused&) {
        throw;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kNetwork || attempt >= 4 || stop) throw;
        back_off(cat("posting the verdict on job ", job->job_id, ": ", e.what()));
      }
    }
  }
  return stats;
}

}  // namespace stoa::verify
