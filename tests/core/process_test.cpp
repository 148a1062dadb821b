#include "core/process.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/process_run.h"
#include "support/file_text.h"
#include "support/temp_dir.h"

namespace stoa {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

class ProcessTest : public ::testing::Test {
 protected:
  std::string log(const std::string& name) const { return dir_.file(name); }
  testing::TempDir dir_{"child"};
};

TEST_F(ProcessTest, ExitCodeAndOutputGoToTheLog) {
  Process c =
      Process::start({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, logged_to(log("a.log")));
  EXPECT_EQ(c.wait(), 3);
  EXPECT_EQ(c.poll(), 3);
  EXPECT_FALSE(c.running());
  const std::string text = testing::read_text(log("a.log"));
  EXPECT_NE(text.find("out"), std::string::npos);
  EXPECT_NE(text.find("err"), std::string::npos);
}

TEST_F(ProcessTest, TruncatedLogAndCpuTime) {
  { std::ofstream(log("t.log")) << "old run\n"; }
  Process c = Process::start(
      {"/bin/sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo new"},
      logged_to(log("t.log"), /*truncate=*/true));
  EXPECT_EQ(c.cpu_seconds(), 0.0);  // not reaped yet
  EXPECT_EQ(c.wait(), 0);
  EXPECT_EQ(testing::read_text(log("t.log")), "new\n");
  EXPECT_GT(c.cpu_seconds(), 0.01);  // the loop's CPU time, from wait4's rusage

  Process appended = Process::start({"/bin/echo", "more"}, logged_to(log("t.log")));
  EXPECT_EQ(appended.wait(), 0);
  EXPECT_EQ(testing::read_text(log("t.log")), "new\nmore\n");
}

TEST_F(ProcessTest, AMissingNetworkNamespaceIsAClearFailure) {
  ProcessOptions o = logged_to(log("n.log"));
  o.netns = "stoa-test-no-such-namespace";
  o.die_with_parent = true;
  Process c = Process::start({"/bin/echo", "should not run"}, o);
  EXPECT_EQ(c.wait(), 125);
  const std::string text = testing::read_text(log("n.log"));
  EXPECT_NE(text.find("cannot enter the network namespace"), std::string::npos) << text;
  EXPECT_EQ(text.find("should not run"), std::string::npos);
}

TEST_F(ProcessTest, StopSendsTermThenKill) {
  // Ignores SIGTERM: stop() must fall back to SIGKILL after the grace period.
  Process stubborn = Process::start({"/bin/sh", "-c", "trap '' TERM; while true; do sleep 1; done"},
                                    logged_to(log("b.log")));
  std::this_thread::sleep_for(200ms);  // let the trap be installed
  EXPECT_TRUE(stubborn.running());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(stubborn.stop(300ms), 128 + SIGKILL);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);

  Process polite = Process::start({"/bin/sleep", "30"}, logged_to(log("c.log")));
  EXPECT_EQ(polite.stop(5s), 128 + SIGTERM);
}

TEST_F(ProcessTest, DestructorKillsTheWholeProcessGroup) {
  pid_t grandchild = 0;
  {
    // The shell starts a grandchild and reports its pid; both must die with the Process.
    Process c = Process::start({"/bin/sh", "-c", "sleep 60 & echo $! > " + log("pid") + "; wait"},
                               logged_to(log("d.log")));
    for (int i = 0; i < 100 && !fs::exists(log("pid")); ++i) std::this_thread::sleep_for(20ms);
    std::this_thread::sleep_for(50ms);
    std::ifstream(log("pid")) >> grandchild;
    ASSERT_GT(grandchild, 0);
    EXPECT_EQ(::kill(grandchild, 0), 0);
  }
  // Reaped by init eventually; it must at least be gone or a zombie within a moment.
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string pid, comm, state;
    gone = !(stat >> pid >> comm >> state) || state == "Z";
    if (!gone) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(gone);
}

TEST_F(ProcessTest, MissingExecutableAndFailuresAreReported) {
  Process c = Process::start({"/nonexistent/stoa-binary"}, logged_to(log("e.log")));
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
  EXPECT_THROW(Process::start({"/bin/true"}, logged_to(dir_.file("no-such-dir/x.log"))), Error);
}

TEST_F(ProcessTest, ProgressSeesEachNewLastLineOnce) {
  std::vector<std::string> seen;
  run_child_or_throw(
      {"/bin/sh", "-c", "echo one; sleep 0.3; echo two; sleep 0.3"}, log("g.log"), "progress",
      [&](const std::string& l) { seen.push_back(l); }, 50ms);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), "one");
  EXPECT_EQ(seen.back(), "two");
  EXPECT_LE(seen.size(), 2u);
}

TEST_F(ProcessTest, CapturesStdoutAndStderrApart) {
  ProcessOptions o;
  o.out = OutputTarget::capture();
  o.err = OutputTarget::capture();
  const RunResult r = run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 4"}, o);
  EXPECT_EQ(r.status.code, 4);
  EXPECT_FALSE(r.status.signaled());
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST_F(ProcessTest, ACaptureLargerThanAPipeDoesNotBlockTheChild) {
  // 4 MiB: far beyond a pipe's buffer, so the child only finishes if the parent reads while it
  // waits.
  const RunResult r = run_capture({"/bin/sh", "-c", "head -c 4194304 /dev/zero | tr '\\0' x"});
  EXPECT_EQ(r.status.code, 0);
  ASSERT_EQ(r.out.size(), 4194304u);
  EXPECT_EQ(r.out.find_first_not_of('x'), std::string::npos);
}

TEST_F(ProcessTest, SeparateFilesForStdoutAndStderr) {
  ProcessOptions o;
  o.out = OutputTarget::file(log("x.out"));
  o.err = OutputTarget::file(log("x.err"));
  EXPECT_EQ(run_process({"/bin/sh", "-c", "echo to-out; echo to-err >&2"}, o).status.code, 0);
  EXPECT_EQ(testing::read_text(log("x.out")), "to-out\n");
  EXPECT_EQ(testing::read_text(log("x.err")), "to-err\n");
}

TEST_F(ProcessTest, ADeadlineStopsAChildThatOutlivesIt) {
  const RunResult r = run_process({"/bin/sleep", "30"}, {}, 100ms, 5s);
  EXPECT_TRUE(r.timed_out);
  EXPECT_TRUE(r.status.signaled());
  EXPECT_EQ(r.status.signal, SIGTERM);
  EXPECT_EQ(r.status.code, 128 + SIGTERM);

  const RunResult quick = run_process({"/bin/sh", "-c", "exit 5"}, {}, 60s);
  EXPECT_FALSE(quick.timed_out);
  EXPECT_EQ(quick.status.code, 5);
}

TEST_F(ProcessTest, WaitForReportsARunningChildThenItsSignal) {
  Process p = Process::start({"/bin/sleep", "30"});
  EXPECT_EQ(p.wait_for(50ms), std::nullopt);
  EXPECT_TRUE(p.running());
  EXPECT_FALSE(p.exit_status().has_value());
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 128 + SIGTERM);
  ASSERT_TRUE(p.exit_status().has_value());
  EXPECT_EQ(p.exit_status()->signal, SIGTERM);
}

TEST_F(ProcessTest, ABareNameIsFoundOnPathAndAMissingOneExits127) {
  EXPECT_EQ(run_capture({"sh", "-c", "echo hi"}).out, "hi\n");
  ProcessOptions o;
  o.out = OutputTarget::capture();
  o.err = OutputTarget::capture();
  const RunResult missing = run_process({"stoa-no-such-program-anywhere"}, o);
  EXPECT_EQ(missing.status.code, 127);
  EXPECT_NE(missing.err.find("exec failed"), std::string::npos) << missing.err;
  EXPECT_TRUE(find_executable("stoa-no-such-program-anywhere").empty());
  EXPECT_FALSE(find_executable("sh").empty());
}

TEST_F(ProcessTest, WorkingDirectoryAndProcessGroup) {
  ProcessOptions o;
  o.out = OutputTarget::capture();
  o.working_dir = dir_.path();
  EXPECT_EQ(run_process({"/bin/sh", "-c", "pwd -P"}, o).out,
            fs::canonical(dir_.path()).string() + "\n");

  Process own = Process::start({"/bin/sleep", "30"});
  EXPECT_EQ(::getpgid(own.pid()), own.pid());
  ProcessOptions shared;
  shared.own_process_group = false;
  Process same = Process::start({"/bin/sleep", "30"}, shared);
  EXPECT_EQ(::getpgid(same.pid()), ::getpgid(0));
  EXPECT_EQ(same.stop(5s), 128 + SIGTERM);
  EXPECT_EQ(own.stop(5s), 128 + SIGTERM);

  o.working_dir = dir_.file("no-such-dir");
  o.err = OutputTarget::capture();
  const RunResult r = run_process({"/bin/pwd"}, o);
  EXPECT_EQ(r.status.code, 126);
  EXPECT_NE(r.err.find("cannot change to the directory"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stoa
