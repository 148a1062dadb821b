// `stoa hub token add|list|revoke` through the real binary, against the ledger of a live Hub:
// a token added by the CLI lets a worker join, and revoking it ends that worker's session on
// the running hub (another process writes; the hub notices through the ledger).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "roles/hub/hub_fixture.h"
#include "support/stoa_cli.h"

namespace stoa::hub::testing {
namespace {

using stoa::testing::read_text;
using stoa::testing::run_stoa;

TEST_F(HubFixture, TokensAddedAndRevokedByTheCliActOnTheLiveHub) {
  open_hub();
  const std::string run_dir = dir.string();  // the fixture's ledger is <dir>/ledger.sqlite
  ASSERT_EQ(run_stoa(dir, "hub token add guest --run-dir " + run_dir), 0)
      << read_text(dir / "err.txt");
  std::string token = read_text(dir / "out.txt");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  ASSERT_EQ(token.size(), 32u) << token;
  EXPECT_NE(run_stoa(dir, "hub token add guest --run-dir " + run_dir), 0);  // names are unique
  EXPECT_NE(run_stoa(dir, "hub token add x --scope admin --run-dir " + run_dir), 0);

  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the hub's look at the ledger
  net::JoinRequest r;
  r.name = "guest-worker";
  const auto joined = hub->join(token, r);
  EXPECT_EQ(hub->authenticate(joined.session_token), joined.worker_id);

  ASSERT_EQ(run_stoa(dir, "hub token list --run-dir " + run_dir), 0);
  const std::string listed = read_text(dir / "out.txt");
  EXPECT_NE(listed.find("guest"), std::string::npos) << listed;
  EXPECT_NE(listed.find("default"), std::string::npos) << listed;
  EXPECT_EQ(listed.find(token), std::string::npos) << "list must never show a token";

  ASSERT_EQ(run_stoa(dir, "hub token revoke guest --run-dir " + run_dir), 0)
      << read_text(dir / "err.txt");
  EXPECT_EQ(run_stoa(dir, "hub token revoke nobody --run-dir " + run_dir), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_THROW(hub->authenticate(joined.session_token), RequestError);
  EXPECT_THROW(hub->join(token, r), RequestError);
  ASSERT_EQ(run_stoa(dir, "hub token list --run-dir " + run_dir), 0);
  EXPECT_NE(read_text(dir / "out.txt").find("revoked"), std::string::npos);
}

}  // namespace
}  // namespace stoa::hub::testing
