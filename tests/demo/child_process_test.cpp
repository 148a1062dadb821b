#include "cli/child_process.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "core/error.h"

namespace stoa::cli {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

class ChildProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stoa-child-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string log(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  fs::path dir_;
};

TEST_F(ChildProcessTest, ExitCodeAndOutputGoToTheLog) {
  ChildProcess c =
      ChildProcess::start({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, log("a.log"));
  EXPECT_EQ(c.wait(), 3);
  EXPECT_EQ(c.poll(), 3);
  EXPECT_FALSE(c.running());
  const std::string text = read(log("a.log"));
  EXPECT_NE(text.find("out"), std::string::npos);
  EXPECT_NE(text.find("err"), std::string::npos);
}

TEST_F(ChildProcessTest, TruncatedLogAndCpuTime) {
  { std::ofstream(log("t.log")) << "old run\n"; }
  ChildOptions fresh;
  fresh.truncate_log = true;
  ChildProcess c = ChildProcess::start(
      {"/bin/sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo new"},
      log("t.log"), fresh);
  EXPECT_EQ(c.cpu_seconds(), 0.0);  // not reaped yet
  EXPECT_EQ(c.wait(), 0);
  EXPECT_EQ(read(log("t.log")), "new\n");
  EXPECT_GT(c.cpu_seconds(), 0.01);  // the loop's CPU time, from wait4's rusage

  ChildProcess appended = ChildProcess::start({"/bin/echo", "more"}, log("t.log"));
  EXPECT_EQ(appended.wait(), 0);
  EXPECT_EQ(read(log("t.log")), "new\nmore\n");
}

TEST_F(ChildProcessTest, AMissingNetworkNamespaceIsAClearFailure) {
  ChildOptions o;
  o.netns = "stoa-test-no-such-namespace";
  o.die_with_parent = true;
  ChildProcess c = ChildProcess::start({"/bin/echo", "should not run"}, log("n.log"), o);
  EXPECT_EQ(c.wait(), 125);
  const std::string text = read(log("n.log"));
  EXPECT_NE(text.find("cannot enter the network namespace"), std::string::npos) << text;
  EXPECT_EQ(text.find("should not run"), std::string::npos);
}

TEST_F(ChildProcessTest, StopSendsTermThenKill) {
  // Ignores SIGTERM: stop() must fall back to SIGKILL after the grace period.
  ChildProcess stubborn = ChildProcess::start(
      {"/bin/sh", "-c", "trap '' TERM; echo trapped; while true; do sleep 1; done"}, log("b.log"));
  // The trap is installed once the shell says so (an event, not a guess of how long it takes).
  for (const auto until = std::chrono::steady_clock::now() + 60s;
       read(log("b.log")).find("trapped") == std::string::npos &&
       std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(10ms);
  ASSERT_NE(read(log("b.log")).find("trapped"), std::string::npos);
  EXPECT_TRUE(stubborn.running());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(stubborn.stop(300ms), 128 + SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 60s);  // a deadline: stop() never hangs

  ChildProcess polite = ChildProcess::start({"/bin/sleep", "30"}, log("c.log"));
  EXPECT_EQ(polite.stop(5s), 128 + SIGTERM);
}

TEST_F(ChildProcessTest, DestructorKillsTheWholeProcessGroup) {
  pid_t grandchild = 0;
  {
    // The shell starts a grandchild and reports its pid; both must die with the ChildProcess.
    ChildProcess c = ChildProcess::start(
        {"/bin/sh", "-c", "sleep 60 & echo $! > " + log("pid") + "; wait"}, log("d.log"));
    for (const auto until = std::chrono::steady_clock::now() + 60s;
         (std::ifstream(log("pid")) >> grandchild, grandchild <= 0) &&
         std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(10ms);
    ASSERT_GT(grandchild, 0);
    EXPECT_EQ(::kill(grandchild, 0), 0);
  }
  // Reaped by init eventually; it must at least be gone or a zombie (deadline, not a speed).
  bool gone = false;
  for (const auto until = std::chrono::steady_clock::now() + 60s;
       !gone && std::chrono::steady_clock::now() < until;) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string pid, comm, state;
    gone = !(stat >> pid >> comm >> state) || state == "Z";
    if (!gone) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(gone);
}

TEST_F(ChildProcessTest, MissingExecutableAndFailuresAreReported) {
  ChildProcess c = ChildProcess::start({"/nonexistent/stoa-binary"}, log("e.log"));
  EXPECT_EQ(c.wait(), 127);
  try {
    run_child_or_throw({"/bin/sh", "-c", "echo the reason it failed; exit 2"}, log("f.log"),
                       "the step");
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the step failed (exit code 2)"), std::string::npos) << m;
    EXPECT_NE(m.find("the reason it failed"), std::string::npos) << m;
  }
  EXPECT_THROW(ChildProcess::start({"/bin/true"}, (dir_ / "no-such-dir" / "x.log").string()),
               Error);
}

TEST_F(ChildProcessTest, ProgressSeesEachNewLastLineOnce) {
  std::vector<std::string> seen;
  run_child_or_throw(
      {"/bin/sh", "-c", "echo one; sleep 0.3; echo two; sleep 0.3"}, log("g.log"), "progress",
      [&](const std::string& l) { seen.push_back(l); }, 50ms);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), "one");
  EXPECT_EQ(seen.back(), "two");
  EXPECT_LE(seen.size(), 2u);
}

}  // namespace
}  // namespace stoa::cli
