#include "roles/worker/progress_report.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "roles/worker/failure_advice.h"
#include "roles/worker/memory_check.h"
#include "roles/worker/worker_threads.h"

namespace stoa::worker {
namespace {
using namespace std::chrono_literals;

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// "https://10.0.0.5:8443" -> "10.0.0.5:8443"
std::string host_port(const std::string& url) {
  const auto p = url.find("://");
  return p == std::string::npos ? url : url.substr(p + 3);
}

constexpr auto kStatusEvery = 30s;  // the generation line
constexpr auto kFirstStatusAfter = 10s;
constexpr auto kDownloadEvery = 5s;  // a download line at least this often (or every 10 %)
constexpr auto kIdleBeforeSaying = 5s;
constexpr auto kRetryEvery = 10s;
// A hub that misses one call (a restart, a blip) is not news; one away this long is.
constexpr auto kAwayBeforeSaying = 5s;
constexpr auto kFirstAwayReminder = 10min;
constexpr auto kAwayReminderEvery = 30min;

}  // namespace

std::string human_duration(double seconds) {
  if (seconds < 0) return "unknown";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return cat(s, " s");
  if (s < 3600) return cat(s / 60, " min ", s % 60, " s");
  return cat(s / 3600, " h ", (s % 3600) / 60, " min");
}

ProgressReport::ProgressReport(Sink sink) : sink_(std::move(sink)) {
  if (!sink_)
    sink_ = [](const std::string& line) {
      std::fprintf(stdout, "%s\n", line.c_str());
      std::fflush(stdout);
    };
}

void ProgressReport::say(const std::string& line) {
  std::lock_guard lock(say_mutex_);
  sink_(line);
}

void ProgressReport::connecting(const std::string& url, const std::string& pin) {
  say(pin.empty() ? cat("Connecting to the hub at ", host_port(url),
                        url.rfind("https", 0) == 0 ? " (TLS)" : " (plain HTTP: not encrypted)")
                  : cat("Connecting to the hub at ", host_port(url),
                        " (TLS, checking its certificate against the join string: sha256 ",
                        pin.substr(0, 12), "...)"));
}

void ProgressReport::join_retry(const std::string& why, int timeout_s) {
  const auto now = Clock::now();
  if (last_retry_line_ != Clock::time_point{} && now - last_retry_line_ < kRetryEvery) return;
  last_retry_line_ = now;
  if (why.find("kept asking this worker to wait") != std::string::npos) {
    say("The hub is busy and asked this worker to wait (rate limit); waiting, then trying again");
    return;
  }
  say(cat("Cannot join the hub yet: ", why, " Trying again for up to ", timeout_s, " s"));
}

void ProgressReport::joined(const std::string& worker_id, const std::string& name, bool resumed,
                            const std::string& task, bool pinned) {
  if (pinned) say("Connected: the hub's certificate matches the join string");
  say(cat(resumed ? "Rejoined as " : "Joined as ", worker_id, " (", name, "); task: ", task));
}

void ProgressReport::room_checked(uint64_t memory_needed, std::optional<uint64_t> available,
                                  uint64_t disk_needed, std::optional<uint64_t> disk) {
  say(cat("The model needs about ", human_bytes(memory_needed), " of memory (",
          available ? human_bytes(*available) + " free" : std::string("free memory unknown"),
          ") and ", human_bytes(disk_needed), " of disk for its download (",
          disk ? human_bytes(*disk) + " free" : std::string("free space unknown"), ")"));
}

void ProgressReport::weights_applied(uint64_t version, bool anchor, double apply_ms) {
  say(cat("Weights version ", version, " ready (", anchor ? "the full model" : "an update patch",
          ", applied in ",
          apply_ms < 1000 ? cat(static_cast<int64_t>(apply_ms), " ms")
                          : fixed(apply_ms / 1000, 1) + " s",
          ")"));
}

void ProgressReport::rollout_answered(const net::RolloutSubmission& rollout,
                                      const net::RolloutResponse& response) {
  ++sent_;
  if (response.status == net::IntakeStatus::kRejected) {
    ++rejected_;
    say(cat("A rollout was rejected by the hub: ", rejection_in_words(response.reason), " (",
            response.reason, ", rollout ", rollout.id.substr(0, 8), ")"));
  } else {
    ++accepted_;  // a duplicate is an earlier send that the hub did accept
  }
}

void ProgressReport::sync_problem(const std::string& why) {
  if (why.empty() || why == last_sync_problem_) return;
  last_sync_problem_ = why;
  if (why.find("disk full") == std::string::npos) return;  // the log has the others
  say("The disk is full: the model download is paused until space is freed (or start again "
      "with --state-dir on another disk). " +
      why.substr(0, 300));
}

void ProgressReport::run_ended() {
  say("The run has ended: the hub says training is over and needs no more work. Thank you! "
      "The worker stops now");
}

void ProgressReport::stopping(int grace_s) {
  say(cat("Stopping: handing the finished rollouts to the hub (up to ", grace_s, " s)"));
}

void ProgressReport::stopped(uint64_t tokens, double idle_fraction) {
  say(cat("Stopped. ", tokens, " tokens generated; rollouts sent ", sent_.load(), ", accepted ",
          accepted_.load(), ", rejected ", rejected_.load(), "; idle ",
          static_cast<int>(100 * idle_fraction + 0.5), " % of the time"));
}

void ProgressReport::watch(const WorkerGauges& gauges, std::function<std::string()> sync_error) {
  gauges_ = &gauges;
  sync_error_ = std::move(sync_error);
}

void ProgressReport::run(std::stop_token stop) {
  while (!wait_for_stop(stop, 1s)) tick(Clock::now());
}

void ProgressReport::report_download(Clock::time_point now) {
  const std::optional<net::BlobDownload> d = gauges_->download ? gauges_->download() : std::nullopt;
  if (!d) {
    if (last_download_ && last_download_->total > 0)
      say(cat("Download finished: ", human_bytes(last_download_->total), " in ",
              human_duration(std::chrono::duration<double>(now - download_started_).count())));
    last_download_.reset();
    return;
  }
  if (!last_download_ || last_download_->hash != d->hash) {
    download_started_ = now;
    last_download_line_ = {};
    last_download_tenth_ = -1;
  }
  last_download_ = d;
  const int tenth = d->total > 0 ? static_cast<int>(10 * d->bytes / d->total) : -1;
  if (last_download_line_ != Clock::time_point{} && now - last_download_line_ < kDownloadEvery &&
      tenth == last_download_tenth_)
    return;
  last_download_line_ = now;
  last_download_tenth_ = tenth;
  // What the blob is, when the sync says (its source knows only the hash): a patch of a few
  // hundred KB must not read as the model.
  const std::optional<net::BlobRef> ref = gauges_->fetching ? gauges_->fetching() : std::nullopt;
  std::string what = "the model";
  if (ref && ref->hash == d->hash)
    what = ref->kind == "patch" ? cat("the update to weights version ", ref->to_version,
                                      " (a patch from version ", ref->from_version, ")")
                                : cat("the model (weights version ", ref->to_version, ")");
  std::string line = cat("Downloading ", what, ": ", human_bytes(d->bytes));
  if (d->total > 0)
    line += cat(" of ", human_bytes(d->total), " (", 100 * d->bytes / d->total, " %)");
  if (d->bytes_per_s > 0)
    line += cat(", ", human_bytes(static_cast<uint64_t>(d->bytes_per_s)), "/s");
  if (d->eta_s >= 0) line += cat(", about ", human_duration(d->eta_s), " left");
  say(line);
}

void ProgressReport::report_contact(Clock::time_point now) {
  const HubContact::State s = gauges_->hub.state();
  hub_away_ = !s.reachable;
  if (s.reachable) {
    if (away_said_)
      say(cat("The hub answers again (it could not be reached for ",
              human_duration(std::chrono::duration<double>(now - away_since_).count()),
              "); carrying on"));
    away_said_ = false;
    return;
  }
  if (!away_said_) {
    if (now - s.since < kAwayBeforeSaying) return;
    away_said_ = true;
    away_since_ = s.since;
    next_away_reminder_ = s.since + kFirstAwayReminder;
    say(cat("The hub cannot be reached (", s.why.substr(0, 200),
            "). The worker keeps trying, less often as it lasts, and carries on by itself when "
            "the hub is back"));
  } else if (now >= next_away_reminder_) {
    next_away_reminder_ = now + kAwayReminderEvery;
    say(cat("The hub has not been reachable for ",
            human_duration(std::chrono::duration<double>(now - s.since).count()),
            ": the operator may have stopped the run or lost the hub's machine. The worker keeps "
            "trying; stop it with Ctrl-C if the run is over"));
  }
}

void ProgressReport::tick(Clock::time_point now) {
  if (!gauges_) return;
  report_contact(now);
  report_download(now);
  if (sync_error_) sync_problem(sync_error_());
  const double rate = rate_.sample(gauges_->tokens_generated, now);
  if (!gauges_->have_engine) {
    if (!last_download_ && !waiting_first_said_) {
      waiting_first_said_ = true;
      say("Waiting for the hub to publish the model's weights");
    }
    return;
  }
  if (gauges_->rollouts_running > 0) {
    idle_since_ = {};
    idle_said_ = false;
  } else if (idle_since_ == Clock::time_point{}) {
    idle_since_ = now;
  } else if (!idle_said_ && !hub_away_ && now - idle_since_ >= kIdleBeforeSaying) {
    idle_said_ = true;
    say("Waiting for new work from the hub (it has no prompts to hand out right now)");
  }
  if (next_status_ == Clock::time_point{}) next_status_ = now + kFirstStatusAfter;
  if (now < next_status_) return;
  if (hub_away_) return;  // "Generating: 0.0 tokens/s" would hide that the hub is away
  next_status_ = now + kStatusEvery;
  std::string serving;
  if (const auto swarm = gauges_->swarm ? gauges_->swarm() : std::nullopt)
    serving = cat("; serving weights to ", swarm->serving_peers, " other workers (",
                  human_bytes(swarm->uploaded_bytes), " sent so far)");
  say(cat("Generating: ", fixed(rate, 1), " tokens/s (last 30 s); rollouts sent ", sent_.load(),
          ", accepted ", accepted_.load(), ", rejected ", rejected_.load(), "; weights version ",
          gauges_->engine_version.load(), serving));
}

}  // namespace stoa::worker
