// Issue 49: with `[hub] port = 0` (the default) a restarted hub came back on another port, its
// join string changed and every running worker was orphaned. The first start records the port
// it took (<run dir>/hub_port); restarts — after a kill -9 or a clean stop — bind it again and
// print the same join strings; a recorded port something else holds is refused in words.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include "integration/cluster.h"

namespace stoa::integration {
namespace {

// A listener on 127.0.0.1:port, closed with the object: the port taken by someone else.
struct PortHolder {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  explicit PortHolder(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    held = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
           ::listen(fd, 4) == 0;
  }
  ~PortHolder() {
    if (fd >= 0) ::close(fd);
  }
  bool held = false;
};

TEST(HubRestart, PortZeroKeepsItsPortAndJoinStringsAcrossRestarts) {
  if (!have_stoa_run()) GTEST_SKIP() << "`stoa hub` needs the trainer build: skipped";
  RunSpec spec;
  ASSERT_EQ(spec.port, 0) << "the default: any free port";
  Cluster c("hub_restart", spec);
  c.start_hub(60s, "", /*alone=*/true);
  const int port = c.port();
  const std::string join = c.join_string();
  const std::string trainer_join = c.trainer_join_string();
  ASSERT_GT(port, 0);
  ASSERT_NE(join.find(":" + std::to_string(port)), std::string::npos) << join;
  EXPECT_EQ(read_text(c.run_dir() / "hub_port"), std::to_string(port) + "\n");

  // Killed without a word, then started again: the same port, the same join strings.
  c.kill_hub();
  c.start_hub(60s, "", /*alone=*/true);
  EXPECT_EQ(c.port(), port) << c.logs();
  EXPECT_EQ(c.join_string(), join);
  EXPECT_EQ(c.trainer_join_string(), trainer_join);
  EXPECT_NE(c.hub().err().find("port " + std::to_string(port) + " as at this run's first start"),
            std::string::npos)
      << c.hub().err();
  // Its log is in the run directory as well as on stderr, appended across the restart
  // (roles/run/run_log.h): two starts, and the restart's port line.
  const std::string log = read_text(c.run_dir() / "hub.log");
  size_t starts = 0;
  for (size_t at = log.find("start: pid"); at != std::string::npos;
       at = log.find("start: pid", at + 1))
    ++starts;
  EXPECT_EQ(starts, 2u) << log;
  EXPECT_NE(log.find("as at this run's first start"), std::string::npos) << log;

  // Stopped cleanly and held by someone else meanwhile: refused, saying which port and why.
  c.hub().signal(SIGTERM);
  ASSERT_EQ(c.hub().wait(30s), 0) << c.logs();
  const PortHolder holder(port);
  ASSERT_TRUE(holder.held) << "port " << port << " was taken between the stop and the test";
  Process refused({"hub", "--config", (c.dir() / "run.toml").string()}, c.dir() / "refused");
  ASSERT_EQ(refused.wait(60s), 1) << refused.err();
  EXPECT_NE(refused.err().find("cannot bind port " + std::to_string(port) +
                               ", which this run's hub took at its first start"),
            std::string::npos)
      << refused.err();
  EXPECT_NE(refused.err().find((c.run_dir() / "hub_port").string()), std::string::npos)
      << refused.err();
}

}  // namespace
}  // namespace stoa::integration
