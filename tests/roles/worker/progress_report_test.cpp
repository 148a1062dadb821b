// The volunteer's progress lines (roles/worker/progress_report.h), driven by the gauges the
// worker publishes and a clock the test moves: the download is told every 5 s or 10 % (not
// every poll), the generation rate is a rolling one, waiting is said once per idle spell,
// rejections come with their reason in words.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "roles/worker/failure_advice.h"
#include "roles/worker/progress_report.h"

namespace stoa::worker {
namespace {
using namespace std::chrono_literals;

struct Captured {
  std::vector<std::string> lines;
  ProgressReport::Sink sink() {
    return [this](const std::string& l) { lines.push_back(l); };
  }
  size_t count(const std::string& needle) const {
    size_t n = 0;
    for (const auto& l : lines) n += l.find(needle) != std::string::npos;
    return n;
  }
  std::string all() const {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

TEST(ProgressReport, ADownloadIsToldEveryFiveSecondsOrTenPercentAndWhenItEnds) {
  Captured out;
  ProgressReport report(out.sink());
  WorkerGauges gauges;
  std::optional<net::BlobDownload> download;
  gauges.download = [&] { return download; };
  report.watch(gauges);  // no run(): tick() by hand, so no thread races the test's clock
  const auto t0 = ProgressReport::Clock::time_point{} + 1000s;
  const uint64_t total = 1'000'000'000;
  // 1 % per second for 30 s, polled once a second.
  for (int s = 0; s <= 30; ++s) {
    download = net::BlobDownload{"abc", total / 100 * s, total, 10e6, 100.0 - s};
    report.tick(t0 + std::chrono::seconds(s));
  }
  // A line at the start, then every 5 s (each 10 % step falls on one of them here): 7 lines,
  // not 31.
  EXPECT_EQ(out.count("Downloading the model: "), 7u) << out.all();
  EXPECT_EQ(out.count("of 1.0 GB"), 7u) << out.all();
  EXPECT_NE(out.all().find("(30 %), 10 MB/s, about 1 min 10 s left"), std::string::npos)
      << out.all();
  download.reset();
  report.tick(t0 + 31s);
  EXPECT_EQ(out.count("Download finished: 1.0 GB in 31 s"), 1u) << out.all();
}

// A patch is not "the model": the line names the version it brings (the sync knows the blob's
// kind and versions; the download only its hash).
TEST(ProgressReport, APatchDownloadSaysWhichVersionItBrings) {
  Captured out;
  ProgressReport report(out.sink());
  WorkerGauges gauges;
  std::optional<net::BlobDownload> download = net::BlobDownload{"p12", 0, 158'000, 0, -1};
  std::optional<net::BlobRef> fetching = net::BlobRef{"patch", 11, 12, "p12", 158'000};
  gauges.download = [&] { return download; };
  gauges.fetching = [&] { return fetching; };
  report.watch(gauges);
  const auto t0 = ProgressReport::Clock::time_point{} + 1000s;
  report.tick(t0);
  EXPECT_EQ(out.count("Downloading the update to weights version 12 (a patch from version 11): "
                      "0 bytes of 158 KB"),
            1u)
      << out.all();
  EXPECT_EQ(out.count("Downloading the model"), 0u) << out.all();
  download = net::BlobDownload{"a20", 0, 9'000'000, 0, -1};
  fetching = net::BlobRef{"anchor", 0, 20, "a20", 9'000'000};
  report.tick(t0 + 1s);
  EXPECT_EQ(out.count("Downloading the model (weights version 20): 0 bytes of 9.0 MB"), 1u)
      << out.all();
  // The sync between blobs (or another blob's hash): no version is claimed.
  fetching.reset();
  download = net::BlobDownload{"x", 0, 999, 0, -1};
  report.tick(t0 + 2s);
  EXPECT_EQ(out.count("Downloading the model: 0 bytes of 999 bytes"), 1u) << out.all();
}

TEST(ProgressReport, GeneratingWaitingAndRejectionsInWords) {
  Captured out;
  ProgressReport report(out.sink());
  WorkerGauges gauges;
  report.watch(gauges);
  const auto t0 = ProgressReport::Clock::time_point{} + 1000s;
  report.tick(t0);
  EXPECT_EQ(out.count("Waiting for the hub to publish the model's weights"), 1u) << out.all();
  report.weights_applied(3, true, 1250);
  report.weights_applied(4, false, 12);
  EXPECT_EQ(out.count("Weights version 3 ready (the full model, applied in 1.2 s)"), 1u)
      << out.all();
  EXPECT_EQ(out.count("Weights version 4 ready (an update patch, applied in 12 ms)"), 1u)
      << out.all();
  gauges.have_engine = true;
  gauges.engine_version = 4;
  gauges.rollouts_running = 2;
  net::RolloutSubmission r;
  r.id = "0123456789";
  net::RolloutResponse ok, stale;
  stale.status = net::IntakeStatus::kRejected;
  stale.reason = "stale";
  // 40 tokens/s for 20 s.
  for (int s = 0; s <= 20; ++s) {
    gauges.tokens_generated = 40 * s;
    if (s % 5 == 0) report.rollout_answered(r, s == 10 ? stale : ok);
    report.tick(t0 + std::chrono::seconds(s));
  }
  EXPECT_EQ(out.count("A rollout was rejected by the hub: made with weights too old to be used "
                      "(stale"),
            1u)
      << out.all();
  EXPECT_EQ(out.count("Generating: 40.0 tokens/s (last 30 s); rollouts sent 3, accepted 2, "
                      "rejected 1; weights version 4"),
            1u)
      << out.all();
  // Idle: said once after 5 s, not every second.
  gauges.rollouts_running = 0;
  for (int s = 21; s <= 29; ++s) report.tick(t0 + std::chrono::seconds(s));
  EXPECT_EQ(out.count("Waiting for new work from the hub"), 1u) << out.all();
  EXPECT_EQ(report.sent(), 5u);
  EXPECT_EQ(report.rejected(), 1u);
}

TEST(ProgressReport, AFullDiskIsToldOnceWithWhatToDo) {
  Captured out;
  ProgressReport report(out.sink());
  const std::string why = "spool /s/x.blob: disk full after 10 of 99 bytes of /v1/blobs/x";
  report.sync_problem(why);
  report.sync_problem(why);
  EXPECT_EQ(out.count("The disk is full"), 1u) << out.all();
  EXPECT_EQ(out.count("--state-dir"), 1u) << out.all();
}

// A hub that goes away is told in one line (not a warning per failed call, not a generation
// line of 0.0 tokens/s every 30 s), its return in one more, a long absence in a reminder.
TEST(ProgressReport, AHubThatGoesAwayIsToldOnceAndItsReturnOnce) {
  Captured out;
  ProgressReport report(out.sink());
  WorkerGauges gauges;
  gauges.have_engine = true;
  report.watch(gauges);
  const auto t0 = ProgressReport::Clock::time_point{} + 1000s;
  report.tick(t0);
  gauges.hub.unreachable("heartbeat", "connection refused", t0 + 1s);
  for (int s = 1; s <= 300; ++s) {
    gauges.hub.unreachable("lease", "connection refused", t0 + std::chrono::seconds(s));
    report.tick(t0 + std::chrono::seconds(s));
  }
  EXPECT_EQ(out.count("The hub cannot be reached (connection refused)"), 1u) << out.all();
  EXPECT_EQ(out.count("Generating: "), 0u) << out.all();
  EXPECT_EQ(out.count("Waiting for new work"), 0u) << out.all();
  // Asked again less often as it lasts, up to the cap.
  EXPECT_EQ(gauges.hub.backoff(2000ms, 30000ms), 30000ms);
  report.tick(t0 + 11min);
  EXPECT_EQ(out.count("The hub has not been reachable for 10 min"), 1u) << out.all();
  report.tick(t0 + 12min);
  EXPECT_EQ(out.count("has not been reachable"), 1u) << out.all();
  gauges.hub.answered(t0 + 13min);
  report.tick(t0 + 13min);
  report.tick(t0 + 14min);
  EXPECT_EQ(out.count("The hub answers again (it could not be reached for 12 min 59 s)"), 1u)
      << out.all();
  EXPECT_EQ(gauges.hub.backoff(2000ms, 30000ms), 2000ms);
  EXPECT_GE(out.count("Generating: "), 1u) << out.all();
}

TEST(ProgressReport, AShortBlipIsNotNews) {
  Captured out;
  ProgressReport report(out.sink());
  WorkerGauges gauges;
  report.watch(gauges);
  const auto t0 = ProgressReport::Clock::time_point{} + 1000s;
  gauges.hub.unreachable("sync", "timed out", t0);
  report.tick(t0 + 2s);
  gauges.hub.answered(t0 + 3s);
  report.tick(t0 + 4s);
  EXPECT_EQ(out.count("hub cannot be reached"), 0u) << out.all();
  EXPECT_EQ(out.count("answers again"), 0u) << out.all();
}

TEST(ProgressReport, TheEndOfTheRunIsToldInWords) {
  Captured out;
  ProgressReport report(out.sink());
  report.run_ended();
  EXPECT_EQ(out.count("The run has ended: the hub says training is over"), 1u) << out.all();
}

TEST(HubContact, AnAnswerIsNotAnOutage) {
  EXPECT_TRUE(is_unreachable(Error(ErrorKind::kNetwork, "GET http://h:1/v1/version: Connection")));
  EXPECT_FALSE(is_unreachable(Error(ErrorKind::kNetwork, "lease: HTTP 403: quarantined")));
  EXPECT_FALSE(is_unreachable(Error(ErrorKind::kIntegrity, "blob abc: received 3 bytes")));
}

TEST(FailureAdvice, RejectionReasonsReadAsWords) {
  EXPECT_EQ(rejection_in_words("group_full"), "its group already had enough rollouts");
  EXPECT_NE(rejection_in_words("lease_revoked").find("taken back"), std::string::npos);
  EXPECT_EQ(rejection_in_words("something_new"), "something_new");
}

}  // namespace
}  // namespace stoa::worker
