// `stoa status`: the screen shows the run's figures, never lets a worker's name drive the
// terminal, stays one screen with many workers, and reads a live hub over HTTP.
#include "app/status/status_view.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>

#include "app/status/status_watch.h"
#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"

namespace stoa::app {
namespace {

using nlohmann::json;

json sample_status() {
  json s;
  s["protocol"] = 3;
  s["task"] = "search";
  s["uptime_s"] = 61.2;
  s["latest_version"] = 7;
  s["step"] = 12;
  s["leases_open"] = 4;
  s["counters"] = {{"rollouts_accepted", 480}, {"rollouts_rejected", 3}, {"groups_trained", 57},
                   {"groups_queued", 2},       {"groups_dropped", 1},    {"rollouts_duplicate", 0}};
  s["last_step"] = {{"step", 12},   {"reward_mean", 0.4375}, {"masked_fraction", 0.0123},
                    {"tv", 0.0456}, {"busy_fraction", 0.81}, {"step_seconds", 9.5},
                    {"groups", 8}};
  s["workers"] = json::array();
  s["workers"].push_back({{"id", "a"},
                          {"name", "laptop-1"},
                          {"version", 6},
                          {"patch_lag", 1},
                          {"tokens_per_s", 120.5},
                          {"idle_fraction", 0.05},
                          {"rollouts_accepted", 300},
                          {"seen_s_ago", 1.2}});
  s["workers"].push_back({{"id", "b"},
                          {"name", "desk-2"},
                          {"version", 7},
                          {"patch_lag", 0},
                          {"tokens_per_s", 80.0},
                          {"idle_fraction", 0.10},
                          {"rollouts_accepted", 180},
                          {"seen_s_ago", 0.4}});
  return s;
}

TEST(StatusView, ShowsTheRunTheStepAndEveryWorker) {
  const std::string screen = render_status(sample_status());
  EXPECT_NE(screen.find("version 7"), std::string::npos) << screen;
  EXPECT_NE(screen.find("trainer step 12"), std::string::npos) << screen;
  EXPECT_NE(screen.find("reward 0.438"), std::string::npos) << screen;
  EXPECT_NE(screen.find("masked 0.0123"), std::string::npos) << screen;
  EXPECT_NE(screen.find("TV 0.0456"), std::string::npos) << screen;
  EXPECT_NE(screen.find("busy 81%"), std::string::npos) << screen;
  EXPECT_NE(screen.find("rollouts accepted 480"), std::string::npos) << screen;
  EXPECT_NE(screen.find("laptop-1"), std::string::npos) << screen;
  EXPECT_NE(screen.find("desk-2"), std::string::npos) << screen;
  EXPECT_NE(screen.find("2 workers, 200.5 tokens/s in all"), std::string::npos) << screen;
}

TEST(StatusView, AStrangersNameCannotDriveTheTerminal) {
  json s = sample_status();
  // Clear screen, set the window title, an 8-bit CSI, a bell, a newline, invalid UTF-8.
  s["workers"][0]["name"] =
      "\x1b[2J\x1b]0;owned\x07\xc2\x9b"
      "31m\nfake row\xff";
  s["task"] = "\x1b[31mred";
  const std::string screen = render_status(s);
  EXPECT_EQ(screen.find('\x1b'), std::string::npos);
  EXPECT_EQ(screen.find('\x07'), std::string::npos);
  EXPECT_EQ(screen.find("\xc2\x9b"), std::string::npos);
  EXPECT_EQ(screen.find("\nfake row"), std::string::npos) << "a name must not start a line";
  EXPECT_NE(screen.find("?[2J?]0;owned??31m?fake"), std::string::npos) << screen;
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x9c\x93", 10), "caf\xc3\xa9 \xe2\x9c\x93");  // UTF-8 kept
}

TEST(StatusView, ManyWorkersStayOneScreenAndLongNamesAreCut) {
  json s = sample_status();
  s["workers"] = json::array();
  for (int i = 0; i < 500; ++i)
    s["workers"].push_back(
        {{"name", std::string(300, 'n') + std::to_string(i)}, {"tokens_per_s", 1.0}});
  StatusViewOptions view;
  view.max_workers = 10;
  const std::string screen = render_status(s, view);
  int lines = 0;
  for (char c : screen) lines += c == '\n';
  EXPECT_LE(lines, 20) << screen;
  EXPECT_NE(screen.find("… and 490 more workers"), std::string::npos) << screen;
  EXPECT_NE(screen.find("500 workers, 500.0 tokens/s in all"), std::string::npos) << screen;
  for (size_t start = 0, end; (end = screen.find('\n', start)) != std::string::npos;
       start = end + 1)
    EXPECT_LE(end - start, 140u) << screen.substr(start, end - start);
}

TEST(StatusView, SaysWhenStepsCarryNoLearningSignal) {
  json s = sample_status();
  s["learning_signal"] = {{"steps", 12},
                          {"steps_without_signal", 11},
                          {"groups", 96},
                          {"groups_uniform", 90},
                          {"warn_after_steps", 10},
                          {"consecutive_steps_without_signal", 11},
                          {"warning", "no learning signal for the last 11 trainer steps"}};
  const std::string screen = render_status(s);
  EXPECT_NE(screen.find("learning signal: 11 of 12 steps without (11 in a row), 90 of 96 groups "
                        "uniform"),
            std::string::npos)
      << screen;
  EXPECT_NE(screen.find("WARNING: no learning signal for the last 11 trainer steps"),
            std::string::npos)
      << screen;
  s["learning_signal"].erase("warning");
  EXPECT_EQ(render_status(s).find("WARNING"), std::string::npos);
}

// [eval]'s held-out evaluation rides in the last step's extra (roles/trainer/held_out_eval.h).
TEST(StatusView, ShowsTheLatestHeldOutEvaluation) {
  json s = sample_status();
  EXPECT_EQ(render_status(s).find("held-out"), std::string::npos) << "no [eval], no line";
  s["last_step"]["extra"] = {{"grad_norm", 0.5},         {"eval_step", 10},
                             {"eval_version", 10},       {"eval_questions", 40},
                             {"eval_mean_reward", 0.25}, {"eval_pass_at_1", 0.2},
                             {"eval_pass_at_4", 0.45}};
  const std::string screen = render_status(s);
  EXPECT_NE(screen.find("held-out eval at step 10 (version 10): mean reward 0.250  pass@1 0.200  "
                        "pass@4 0.450  over 40 questions"),
            std::string::npos)
      << screen;
}

TEST(StatusView, WorkersSharingANameAreToldApartByTheirIds) {
  json s = sample_status();
  s["workers"][0]["name"] = "worker";
  s["workers"][1]["name"] = "worker";
  s["workers"].push_back({{"id", "c"}, {"name", 7}});  // not a string: shown, not a crash
  const std::string screen = render_status(s);
  EXPECT_NE(screen.find("worker (a)"), std::string::npos) << screen;
  EXPECT_NE(screen.find("worker (b)"), std::string::npos) << screen;
}

TEST(StatusView, MissingOrMistypedFieldsRenderAsNoneNotACrash) {
  EXPECT_NE(render_status(json::object()).find("version none"), std::string::npos);
  json s = sample_status();
  s["counters"] = "not an object";
  s["workers"][0]["tokens_per_s"] = "fast";
  s["last_step"] = nullptr;
  EXPECT_NO_THROW(render_status(s));
}

class StatusFromLiveHub : public hub::testing::HubFixture {};

TEST_F(StatusFromLiveHub, OnceReadsTheHubOverHttpAndPrintsOneScreen) {
  open_hub();
  publish(0);
  join("volunteer-laptop");
  hub::HubServer server(*hub, hub::ServerOptions{});
  server.start();

  StatusWatchOptions options;
  options.hub_url = server.url();
  options.once = true;
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  std::atomic<bool> stop{false};
  ASSERT_EQ(watch_status(options, stop, out), 0);
  std::rewind(out);
  std::string screen(1 << 16, '\0');
  screen.resize(std::fread(screen.data(), 1, screen.size(), out));
  std::fclose(out);
  EXPECT_NE(screen.find("task search"), std::string::npos) << screen;
  EXPECT_NE(screen.find("version 0"), std::string::npos) << screen;
  EXPECT_NE(screen.find("volunteer-laptop"), std::string::npos) << screen;
  EXPECT_NE(screen.find("1 workers"), std::string::npos) << screen;
}

TEST(StatusFromDeadHub, OnceFailsWithExitStatusOne) {
  StatusWatchOptions options;
  options.hub_url = "http://127.0.0.1:1";  // nothing listens on port 1
  options.once = true;
  std::atomic<bool> stop{false};
  EXPECT_EQ(watch_status(options, stop, stdout), 1);
}

}  // namespace
}  // namespace stoa::app
