// The dashboard in a real browser (Debian's headless Chromium) against a live hub: the page loads,
// its charts draw lines from /v1/history, the worker table fills from /v1/status, and a worker
// named with markup appears as text — no element is made from it and its script never runs. A
// screenshot is kept as a test artifact (<build>/test-artifacts/dashboard.png).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "core/process_run.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"

namespace stoa::hub::testing {
namespace {

namespace fs = std::filesystem;

const char* kHostileName = "<img src=x onerror=\"document.title='pwned'\"><b>bold</b>";

std::string chromium_binary() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (fs::exists(path)) return path;
  return "";
}

std::vector<std::string> chromium_argv(const std::string& binary, const fs::path& profile) {
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start. The page is our own
  // and served from loopback.
  return {binary,
          "--headless=new",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-dev-shm-usage",
          "--no-first-run",
          "--user-data-dir=" + profile.string(),
          "--window-size=1280,1100",
          "--virtual-time-budget=6000"};
}

class DashboardInBrowser : public HubFixture {
 protected:
  // A run with history: versions with patches, trainer steps with rising reward whose last three
  // had no learning signal (past the warning's limit of 3), DPPO figures in the millionths, four
  // workers, two of them under the default name "worker".
  void make_run() {
    config.no_signal_warn_steps = 3;
    open_hub();
    for (uint64_t v = 0; v < 6; ++v) {
      pulse::Published p;
      p.version = v;
      if (v > 0) {
        pulse::CatalogEntry patch;
        patch.kind = pulse::BlobKind::kPatch;
        patch.from_version = v - 1;
        patch.to_version = v;
        patch.hash = Hash128{v, 7};
        patch.bytes = 1000 + 250 * v;
        p.patch = patch;
      }
      hub->publish_version(p, Hash128{v, v});
    }
    for (const char* name : {"honest-laptop", kHostileName, "worker", "worker"}) {
      net::JoinRequest r;
      r.name = name;
      const std::string id = hub->join("join-secret", r).worker_id;
      if (std::string(name) == "worker") default_named.push_back(id);
      net::Heartbeat hb;
      hb.worker_id = id;
      hb.version = 4;
      hb.tokens_generated = 5000;
      hb.tokens_per_s = 111.5;
      hb.idle_fraction = 0.1;
      hub->heartbeat(id, hb);
    }
    for (int64_t step = 1; step <= 8; ++step) {
      StepReport report;
      report.step = step;
      report.reward_mean = 0.1 * static_cast<double>(step);
      report.masked_fraction = 2.86e-6;
      report.tv = 1e-6;
      report.groups = 4;
      report.groups_uniform = step > 5 ? 4 : 1;
      report.extra["grad_norm"] = step > 5 ? 0.0 : 0.5;
      report.busy_fraction = 0.8;
      report.step_seconds = 5;
      clock += 5000;
      hub->mark_trained({}, report);
    }
  }
  std::vector<std::string> default_named;  // ids of the workers that joined as "worker"
};

TEST_F(DashboardInBrowser, ChartsDrawAndAHostileNameStaysText) {
  const std::string chromium = chromium_binary();
  ASSERT_FALSE(chromium.empty())
      << "Debian's chromium is not installed (scripts/setup installs it)";
  make_run();
  HubServer server(*hub, ServerOptions{});
  server.start();
  const std::string url = server.url() + "/";

  auto argv = chromium_argv(chromium, dir / "profile");
  argv.push_back("--dump-dom");
  argv.push_back(url);
  ProcessOptions options;
  options.out = OutputTarget::capture();
  options.err = OutputTarget::capture();
  const RunResult run = run_process(argv, options, std::chrono::seconds(90));
  ASSERT_FALSE(run.timed_out) << run.err;
  ASSERT_EQ(run.status.code, 0) << run.err;
  const std::string& dom = run.out;

  // The page polled the hub and rendered (data-updates counts successful refreshes).
  EXPECT_NE(dom.find("data-updates=\""), std::string::npos) << dom.substr(0, 4000);
  EXPECT_NE(dom.find("<div id=\"err\"></div>"), std::string::npos) << "the page shows an error";
  // Every chart exists; the ones fed by history draw a path through every point.
  for (const char* id :
       {"c-reward", "c-busy", "c-dppo", "c-versions", "c-fleet", "c-lag", "c-workers"})
    EXPECT_NE(dom.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_NE(dom.find("data-series=\"8\""), std::string::npos) << "8 steps in the step charts";
  EXPECT_NE(dom.find("data-series=\"5\""), std::string::npos) << "5 patches in the version chart";
  const std::regex path_with_line(R"(<path d="M[0-9.]+ [0-9.]+(L[0-9.]+ [0-9.]+){7})");
  EXPECT_TRUE(std::regex_search(dom, path_with_line)) << "no 8-point line drawn";
  EXPECT_NE(dom.find("honest-laptop"), std::string::npos);

  // What the page shows (the DOM before its own script, whose text is no concern of these).
  const std::string shown = dom.substr(0, dom.find("<script>"));
  // The reward chart names the run's task and promises no metric the task may not have.
  EXPECT_NE(shown.find("Training reward (mean over each step's rollouts, task search)"),
            std::string::npos);
  EXPECT_EQ(shown.find("exact match"), std::string::npos);
  EXPECT_EQ(shown.find("pass@1"), std::string::npos);
  // Millionths on the DPPO axis in exponent form, not cut to their last digits.
  EXPECT_NE(shown.find(">2.86e-6</text>"), std::string::npos);
  const size_t cut = shown.find("00000286");
  EXPECT_EQ(cut, std::string::npos) << shown.substr(cut < 300 ? 0 : cut - 300, 600);
  // Steps without learning signal: counted in the summary, warned of past the limit.
  EXPECT_NE(shown.find("steps without learning signal <b>3 (3 in a row)</b>"), std::string::npos);
  EXPECT_NE(shown.find("no learning signal for the last 3 trainer steps"), std::string::npos);
  // Two workers with the default name are told apart by their ids (table and chart legend).
  ASSERT_EQ(default_named.size(), 2u);
  for (const auto& id : default_named)
    EXPECT_NE(shown.find("worker (" + id + ")"), std::string::npos) << id;

  // The hostile name is text: escaped in the serialized DOM, no <img>/<b> element from it, and its
  // handler never ran (the title is still the page's own).
  EXPECT_NE(dom.find("&lt;img src=x onerror=\"document.title='pwned'\"&gt;&lt;b&gt;bold&lt;/b&gt;"),
            std::string::npos)
      << dom.substr(0, 6000);
  EXPECT_EQ(dom.find("<img"), std::string::npos);
  EXPECT_EQ(dom.find("<b>bold"), std::string::npos);
  EXPECT_NE(dom.find("<title>Stoa hub</title>"), std::string::npos);
  EXPECT_EQ(dom.find("pwned</title>"), std::string::npos);

  // A screenshot for people (kept beside the test results).
  const char* build_dir = std::getenv("STOA_BINARY");
  const fs::path artifacts =
      (build_dir ? fs::path(build_dir).parent_path() : fs::temp_directory_path()) /
      "test-artifacts";
  fs::create_directories(artifacts);
  auto shot = chromium_argv(chromium, dir / "profile-shot");
  shot.push_back("--screenshot=" + (artifacts / "dashboard.png").string());
  shot.push_back(url);
  ProcessOptions quiet;
  quiet.out = OutputTarget::discard();
  quiet.err = OutputTarget::discard();
  const RunResult shot_run = run_process(shot, quiet, std::chrono::seconds(90));
  EXPECT_EQ(shot_run.status.code, 0);
  EXPECT_GT(fs::file_size(artifacts / "dashboard.png"), 10'000u);
}

}  // namespace
}  // namespace stoa::hub::testing
