// The "http" task against real servers: the reference Python environment (envs/arithmetic) in
// its own process through a whole Episode, and small in-process servers that misbehave —
// unreachable, wrong protocol, malformed, oversized, slow, and not deterministic.
#include "env/tasks/http_env/http_env_task.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/process.h"
#include "env/episode.h"
#include "env/tasks/builtin_tasks.h"
#include "env/token_codec.h"
#include "support/loopback_server.h"
#include "support/source_dir.h"

namespace stoa::env {
namespace {

namespace fs = std::filesystem;

using test::source_dir;

ProcessOptions quiet_stdout() {
  ProcessOptions o;
  o.out = OutputTarget::discard();
  return o;
}

// The reference environment, started as the operator would (python3 FILE serve).
class PythonEnvironment {
 public:
  PythonEnvironment() {
    const std::string python = find_executable("python3");
    if (python.empty()) return;
    port_file_ = fs::temp_directory_path() / ("stoa_arith_port_" + std::to_string(::getpid()));
    fs::remove(port_file_);
    process_ =
        Process::start({python, (source_dir() / "envs/arithmetic/arithmetic_env.py").string(),
                        "serve", "--port", "0", "--port-file", port_file_.string()},
                       quiet_stdout());
    for (int i = 0; i < 200 && !fs::exists(port_file_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    std::ifstream in(port_file_);
    in >> port_;
  }
  ~PythonEnvironment() { fs::remove(port_file_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  bool up() const { return port_ > 0; }

 private:
  fs::path port_file_;
  Process process_;
  int port_ = 0;
};

QaItem problem(const std::string& id, const std::string& question, const std::string& answer) {
  QaItem q;
  q.id = id;
  q.question = question;
  q.golden_answers = {answer};
  q.answer = answer;
  return q;
}

TEST(HttpEnvTask, ThePythonEnvironmentRunsAWholeEpisode) {
  PythonEnvironment env;
  ASSERT_TRUE(env.up()) << "python3 and envs/arithmetic/arithmetic_env.py are needed";
  std::unique_ptr<Task> task = make_task("http", {{"url", env.url()}});
  EXPECT_EQ(task->name(), "http");
  EXPECT_EQ(task->stop_strings(), (std::vector<std::string>{"</calc>", "</answer>"}));
  const QaItem q = problem("p1", "What is (3 + 4) * 5?", "35");
  EXPECT_NE(task->user_prompt(q).find("Problem: What is (3 + 4) * 5?"), std::string::npos);

  ByteCodec codec;
  Episode ep(*task, q, codec, {.max_turns = 3, .max_observation_tokens = 64});
  auto say = [&](const std::string& text) {
    std::vector<int32_t> ids = codec.encode(text);
    return ep.step(ids);
  };
  Decision d = say("Let me compute. <calc> (3 + 4) * 5 </calc>");
  EXPECT_EQ(d.action, ActionKind::kToolCall);
  EXPECT_EQ(d.tool, "calc");
  EXPECT_EQ(codec.decode(d.appended), "\n<result>35</result>\n");
  d = say("no markup");
  EXPECT_EQ(d.action, ActionKind::kInvalid);
  EXPECT_NE(codec.decode(d.appended).find("is invalid"), std::string::npos);
  d = say("So <answer> 35 </answer>");
  EXPECT_TRUE(d.done);
  EXPECT_EQ(ep.reward(), 1.0);
  EXPECT_EQ(task->reward("<answer>36</answer>", {"35"}), 0.0);
  // The final, tool-less turn: a calc yields no observation.
  TurnResult last = task->on_turn(q, "<calc>1+1</calc>", /*tools_allowed=*/false);
  EXPECT_EQ(last.action, ActionKind::kToolCall);
  EXPECT_TRUE(last.observation.joined().empty());
  // Asked again, the same answer: the determinism memory stays quiet.
  EXPECT_NO_THROW(task->on_turn(q, "Let me compute. <calc> (3 + 4) * 5 </calc>", true));
  EXPECT_EQ(static_cast<const HttpEnvTask&>(*task).nondeterministic_steps(), 0);
}

// A misbehaving environment on a loopback port, answering /v1/info correctly unless told not to.
// The server answers on its own threads while the test changes the replies (and a slow reply the
// client gave up on is still being answered), so every knob is read and set under one lock.
class FakeEnvironment {
 public:
  FakeEnvironment() {
    server_.http.Get("/v1/info", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(locked(info_), "application/json");
    });
    server_.http.Post("/v1/step", [this](const httplib::Request&, httplib::Response& res) {
      const int n = steps_.fetch_add(1);
      const int slow_ms = slow_ms_.load();
      if (slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
      const std::function<std::string(int)> reply = locked(step_reply_);
      res.set_content(reply ? reply(n) : "{}", "application/json");
    });
    server_.http.Post("/v1/reward", [this](const httplib::Request&, httplib::Response& res) {
      res.status = reward_status_.load();
      res.set_content(locked(reward_reply_), "application/json");
    });
    server_.start();
  }
  std::string url() const { return server_.url(); }

  void set_info(std::string info) { set_locked(info_, std::move(info)); }
  void set_step_reply(std::function<std::string(int)> reply) {
    set_locked(step_reply_, std::move(reply));
  }
  void set_slow_ms(int ms) { slow_ms_ = ms; }
  void set_reward_status(int status) { reward_status_ = status; }
  void set_reward_reply(std::string reply) { set_locked(reward_reply_, std::move(reply)); }

 private:
  template <typename T>
  T locked(const T& value) const {
    std::lock_guard lock(mutex_);
    return value;
  }
  template <typename T>
  void set_locked(T& slot, T value) {
    std::lock_guard lock(mutex_);
    slot = std::move(value);
  }

  mutable std::mutex mutex_;
  std::string info_ = R"({"protocol": 1, "name": "fake", "stop_strings": ["</x>"]})";
  std::function<std::string(int)> step_reply_;
  std::string reward_reply_ = R"({"reward": 0.5})";
  std::atomic<int> slow_ms_{0};
  std::atomic<int> reward_status_{200};
  std::atomic<int> steps_{0};
  test::LoopbackServer server_;
};

template <typename F>
void expect_environment_error(F&& f, const std::string& needle) {
  try {
    f();
    FAIL() << "no error; wanted one mentioning: " << needle;
  } catch (const EnvironmentError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(HttpEnvTask, AnEnvironmentThatAnswersDifferentlyIsCaught) {
  FakeEnvironment fake;
  fake.set_step_reply([](int n) {
    return nlohmann::json{{"kind", "tool"},
                          {"tool", "t"},
                          {"done", false},
                          {"observation", {{"body", "roll " + std::to_string(n)}}}}
        .dump();
  });
  HttpEnvTask task({.url = fake.url()});
  const QaItem q = problem("q7", "?", "1");
  EXPECT_EQ(task.on_turn(q, "a", true).observation.body, "roll 0");
  EXPECT_EQ(task.on_turn(q, "b", true).observation.body, "roll 1") << "another action";
  expect_environment_error([&] { task.on_turn(q, "a", true); }, "not deterministic: problem 'q7'");
  EXPECT_EQ(task.nondeterministic_steps(), 1);
}

// /v1/info's version is recorded when the task is built; a different one later (the reward
// function edited, the server restarted) is noticed on the way to a reward, counted once per
// change, and the rewards keep flowing.
TEST(HttpEnvTask, AVersionChangeMidRunIsNoticed) {
  FakeEnvironment fake;
  fake.set_info(R"({"protocol": 1, "name": "fake", "stop_strings": ["</x>"], "version": "r1"})");
  HttpEnvTask task({.url = fake.url(), .version_check_s = 0});
  EXPECT_EQ(task.environment_version(), "r1");
  EXPECT_EQ(task.reward("a", {"1"}), 0.5);
  EXPECT_EQ(task.version_changes(), 0);
  fake.set_info(R"({"protocol": 1, "name": "fake", "stop_strings": ["</x>"], "version": 2})");
  EXPECT_EQ(task.reward("a", {"1"}), 0.5);
  EXPECT_EQ(task.version_changes(), 1);
  EXPECT_EQ(task.reward("a", {"1"}), 0.5);
  EXPECT_EQ(task.version_changes(), 1) << "one change, counted once";
  EXPECT_EQ(task.environment_version(), "r1") << "the run's start is what was recorded";
  // Looks are spaced: with the default interval a change right after construction waits.
  HttpEnvTask spaced({.url = fake.url()});
  fake.set_info(R"({"protocol": 1, "name": "fake", "stop_strings": ["</x>"], "version": "r3"})");
  EXPECT_EQ(spaced.reward("a", {"1"}), 0.5);
  EXPECT_EQ(spaced.version_changes(), 0);
  // The reference environment says its version.
  PythonEnvironment env;
  ASSERT_TRUE(env.up());
  EXPECT_FALSE(HttpEnvTask({.url = env.url()}).environment_version().empty());
}

TEST(HttpEnvTask, BrokenEnvironmentsAreClearErrors) {
  // Nobody listening.
  expect_environment_error([] { HttpEnvTask({.url = "http://127.0.0.1:1"}); }, "unreachable");
  {
    FakeEnvironment fake;
    fake.set_info(R"({"protocol": 2, "name": "x", "stop_strings": ["a"]})");
    expect_environment_error([&] { HttpEnvTask({.url = fake.url()}); }, "protocol 2");
  }
  {
    FakeEnvironment fake;
    fake.set_info(R"({"protocol": 1, "name": "x", "stop_strings": []})");
    expect_environment_error([&] { HttpEnvTask({.url = fake.url()}); }, "stop_strings");
  }
  FakeEnvironment fake;
  HttpEnvTask task({.url = fake.url(), .timeout_s = 0.5, .max_reply_bytes = 4096});
  const QaItem q = problem("q", "?", "1");
  fake.set_step_reply([](int) { return std::string("not json"); });
  expect_environment_error([&] { task.on_turn(q, "a", true); }, "not a JSON object");
  fake.set_step_reply([](int) { return std::string(R"({"kind": "dance", "done": false})"); });
  expect_environment_error([&] { task.on_turn(q, "b", true); }, "kind 'dance'");
  fake.set_step_reply([](int) { return std::string(R"({"kind": "tool", "done": false})"); });
  expect_environment_error([&] { task.on_turn(q, "c", true); }, "without 'tool'");
  fake.set_step_reply([](int) {
    return std::string(R"({"kind": "tool", "tool": "t", "done": false, "observation": )"
                       R"({"body": "ran"}})");
  });
  expect_environment_error([&] { task.on_turn(q, "d", false); }, "tools_allowed was false");
  fake.set_step_reply([](int) { return std::string(R"({"kind": "answer", "done": "yes"})"); });
  expect_environment_error([&] { task.on_turn(q, "e", true); }, "'done' is not a boolean");
  fake.set_step_reply([](int) { return "{\"pad\": \"" + std::string(10000, 'x') + "\"}"; });
  expect_environment_error([&] { task.on_turn(q, "f", true); }, "larger than 4096 bytes");
  fake.set_step_reply([](int) { return std::string(R"({"kind": "answer", "done": true})"); });
  fake.set_slow_ms(1500);
  expect_environment_error([&] { task.on_turn(q, "g", true); }, "unreachable");
  fake.set_slow_ms(0);
  fake.set_reward_status(500);
  expect_environment_error([&] { task.reward("r", {"1"}); }, "answered HTTP 500");
  fake.set_reward_status(200);
  fake.set_reward_reply(R"({"reward": "high"})");
  expect_environment_error([&] { task.reward("r", {"1"}); }, "not a finite number");
  fake.set_reward_reply(R"({"reward": 0.25})");
  EXPECT_EQ(task.reward("r", {"1"}), 0.25);
}

TEST(HttpEnvTask, OptionsAreChecked) {
  auto kind_of = [](const TaskOptions& o) {
    try {
      make_task("http", o);
    } catch (const Error& e) {
      return std::string(error_kind_name(e.kind())) + ": " + e.what();
    }
    return std::string("built");
  };
  EXPECT_NE(kind_of({}).find("url"), std::string::npos);
  EXPECT_NE(kind_of({{"url", "https://x:1"}}).find("http://host:port"), std::string::npos);
  EXPECT_NE(kind_of({{"url", "http://x:1/v1"}}).find("without a path"), std::string::npos);
  EXPECT_NE(kind_of({{"url", "http://127.0.0.1:1"}, {"timeout_s", "soon"}}).find("timeout_s"),
            std::string::npos);
  EXPECT_NE(kind_of({{"url", "http://127.0.0.1:1"}, {"port", "1"}}).find("unknown option 'port'"),
            std::string::npos);
  // Every option is the machine's own: a worker reaches the environment only through its hub.
  const TaskRegistry& r = builtin_tasks();
  EXPECT_TRUE(r.run_options("http", {{"url", "http://e:1"}, {"timeout_s", "3"}}).empty());
}

}  // namespace
}  // namespace stoa::env
