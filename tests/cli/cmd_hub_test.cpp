// `stoa hub token add|list|revoke` through the real binary, against the ledger of a live Hub:
// a token added by the CLI lets a worker join, and revoking it ends that worker's session on
// the running hub (another process writes; the hub notices through the ledger).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "net/join_string.h"

#include "roles/hub/hub_fixture.h"
#include "support/stoa_cli.h"

namespace stoa::hub::testing {
namespace {

using stoa::testing::read_text;
using stoa::testing::run_stoa;

TEST_F(HubFixture, TokensAddedAndRevokedByTheCliActOnTheLiveHub) {
  open_hub();
  const std::string run_dir = dir.string();  // the fixture's ledger is <dir>/ledger.sqlite
  // What the serving hub writes: its URL and certificate pin travel in its join string.
  const std::string pin(64, 'b');
  std::ofstream(dir / "hub.json") << nlohmann::json(
      {{"url", "https://0.0.0.0:8443"},
       {"join", net::format_join_string({"https://hub.example:8443", "join-secret", pin})}});
  ASSERT_EQ(run_stoa(dir, "hub token add guest --run-dir " + run_dir), 0)
      << read_text(dir / "err.txt");
  const std::string out = read_text(dir / "out.txt");
  const std::string token_tag = "token guest (scope work): ";
  ASSERT_NE(out.find(token_tag), std::string::npos) << out;
  const std::string token = out.substr(out.find(token_tag) + token_tag.size(), 32);
  ASSERT_EQ(token.size(), 32u) << out;
  // The volunteer's join string: the hub's URL and pin with the new token.
  const std::string join_tag = "join string (stoa work --join): ";
  ASSERT_NE(out.find(join_tag), std::string::npos) << out;
  const size_t at = out.find(join_tag) + join_tag.size();
  const net::JoinString j = net::parse_join_string(out.substr(at, out.find('\n', at) - at));
  EXPECT_EQ(j.url, "https://hub.example:8443");
  EXPECT_EQ(j.token, token);
  EXPECT_EQ(j.sha256, pin);
  // A hub not serving: the token still, and plain words about its join string.
  std::filesystem::remove(dir / "hub.json");
  ASSERT_EQ(run_stoa(dir, "hub token add spare --run-dir " + run_dir), 0);
  EXPECT_NE(read_text(dir / "out.txt").find("not serving"), std::string::npos)
      << read_text(dir / "out.txt");
  EXPECT_NE(run_stoa(dir, "hub token add guest --run-dir " + run_dir), 0);  // names are unique
  EXPECT_NE(run_stoa(dir, "hub token add x --scope admin --run-dir " + run_dir), 0);

  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the hub's look at the ledger
  net::JoinRequest r;
  r.name = "guest-worker";
  const auto joined = hub->join(token, r);
  EXPECT_EQ(hub->access().authenticate(joined.session_token), joined.worker_id);

  ASSERT_EQ(run_stoa(dir, "hub token list --run-dir " + run_dir), 0);
  const std::string listed = read_text(dir / "out.txt");
  EXPECT_NE(listed.find("guest"), std::string::npos) << listed;
  EXPECT_NE(listed.find("default"), std::string::npos) << listed;
  EXPECT_EQ(listed.find(token), std::string::npos) << "list must never show a token";

  ASSERT_EQ(run_stoa(dir, "hub token revoke guest --run-dir " + run_dir), 0)
      << read_text(dir / "err.txt");
  EXPECT_EQ(run_stoa(dir, "hub token revoke nobody --run-dir " + run_dir), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_THROW(hub->access().authenticate(joined.session_token), RequestError);
  EXPECT_THROW(hub->join(token, r), RequestError);
  ASSERT_EQ(run_stoa(dir, "hub token list --run-dir " + run_dir), 0);
  EXPECT_NE(read_text(dir / "out.txt").find("revoked"), std::string::npos);
}

}  // namespace
}  // namespace stoa::hub::testing
