// The hub's Identity on its own (roles/hub/identity/identity.h): tokens installed into a real
// ledger, scopes, tokens made at first start, sessions issued, rotated, expired and ended,
// revocation seen through another connection, and the rate limits answering 429.
#include "roles/hub/identity/identity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "roles/hub/request_error.h"
#include "roles/hub/request_status.h"
#include "support/temp_dir.h"

namespace stoa::hub {
namespace {

class IdentityTest : public ::testing::Test {
 protected:
  IdentityTest() : dir("identity"), ledger(dir.file("ledger.db")) {
    config.ledger_path = dir.file("ledger.db");
    config.join_token = "join-secret";
    config.session_ttl_ms = 10'000;
  }
  testing::TempDir dir;
  Ledger ledger;
  HubConfig config;
};

TEST_F(IdentityTest, TokensMatchOnlyTheirScope) {
  config.operator_token = "op-secret";
  Identity identity(config);
  identity.install(ledger, 1000);
  EXPECT_EQ(identity.match("join-secret", Identity::kWorkScope), "default");
  EXPECT_EQ(identity.match("op-secret", Identity::kOperatorScope), "operator");
  EXPECT_FALSE(identity.match("join-secret", Identity::kOperatorScope));
  EXPECT_FALSE(identity.match("op-secret", Identity::kWorkScope));
  EXPECT_FALSE(identity.match("", Identity::kWorkScope));
  EXPECT_FALSE(identity.match("guess", Identity::kWorkScope));
  // Configured: nothing was written to a file.
  EXPECT_EQ(identity.operator_token_file(), "");
  EXPECT_EQ(identity.trainer_token_file(), "");
}

TEST_F(IdentityTest, MakesOperatorAndTrainerTokensOnceInOwnerOnlyFiles) {
  config.serve_trainer = true;
  std::string op_token;
  {
    Identity identity(config);
    identity.install(ledger, 1000);
    ASSERT_EQ(identity.operator_token_file(), dir.file("operator_token"));
    ASSERT_EQ(identity.trainer_token_file(), dir.file("trainer_token"));
    std::ifstream in(identity.operator_token_file());
    in >> op_token;
    EXPECT_EQ(identity.match(op_token, Identity::kOperatorScope), "operator");
    struct stat st {};
    ASSERT_EQ(::stat(identity.operator_token_file().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  // A restart keeps the token it made (the ledger has a valid one): no new file, same token.
  std::filesystem::remove(dir.file("operator_token"));
  Identity again(config);
  again.install(ledger, 2000);
  EXPECT_EQ(again.operator_token_file(), "");
  EXPECT_FALSE(std::filesystem::exists(dir.file("operator_token")));
  EXPECT_EQ(again.match(op_token, Identity::kOperatorScope), "operator");
}

TEST_F(IdentityTest, SessionsAuthenticateUntilTheyExpireOrEnd) {
  Identity identity(config);
  identity.install(ledger, 0);
  const auto a = identity.issue_session("w-a", "default", 1000);
  EXPECT_EQ(a.expires_ms, 11'000);
  EXPECT_NE(a.hash, a.token);
  EXPECT_EQ(identity.authenticate(a.token, 5000), "w-a");
  EXPECT_EQ(identity.token_name_of("w-a"), "default");
  EXPECT_EQ(request_status([&] { identity.authenticate("", 5000); }), 401);
  EXPECT_EQ(request_status([&] { identity.authenticate("not-a-session", 5000); }), 401);
  // The digest is the key, never the token: presenting the hash does not authenticate.
  EXPECT_EQ(request_status([&] { identity.authenticate(a.hash, 5000); }), 401);
  // Expired: refused, and forgotten.
  EXPECT_EQ(request_status([&] { identity.authenticate(a.token, 11'000); }), 401);
  EXPECT_EQ(identity.sessions(), 0u);

  const auto b1 = identity.issue_session("w-b", "default", 20'000);
  const auto b2 = identity.issue_session("w-b", "default", 25'000);  // rotated
  EXPECT_EQ(identity.authenticate(b1.token, 26'000), "w-b");         // the old one until its expiry
  EXPECT_EQ(identity.authenticate(b2.token, 26'000), "w-b");
  identity.expire_sessions(30'000);
  EXPECT_EQ(request_status([&] { identity.authenticate(b1.token, 30'000); }), 401);
  EXPECT_EQ(identity.authenticate(b2.token, 30'000), "w-b");
  identity.end_sessions_of("w-b");
  EXPECT_EQ(request_status([&] { identity.authenticate(b2.token, 30'000); }), 401);
  EXPECT_EQ(identity.token_name_of("w-b"), "");
}

TEST_F(IdentityTest, RestoredSessionsAuthenticate) {
  Identity first(config);
  first.install(ledger, 0);
  const auto s = first.issue_session("w-a", "default", 1000);
  Identity second(config);
  second.install(ledger, 0);
  second.restore_session(s.hash, "w-a", "default", s.expires_ms);
  EXPECT_EQ(second.authenticate(s.token, 2000), "w-a");
}

TEST_F(IdentityTest, RevokedTokenEndsItsSessionsAfterRefresh) {
  Identity identity(config);
  identity.install(ledger, 0);
  const auto s = identity.issue_session("w-a", "default", 1000);
  // `stoa hub token revoke` from another process: another connection to the same file.
  {
    Ledger other(dir.file("ledger.db"));
    ASSERT_TRUE(other.revoke_join_token("default", 1500));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // past the refresh interval
  identity.refresh(ledger);
  EXPECT_EQ(request_status([&] { identity.authenticate(s.token, 2000); }), 401);
  EXPECT_FALSE(identity.match("join-secret", Identity::kWorkScope));
}

TEST_F(IdentityTest, RateLimitsAnswer429AndCountByWhat) {
  config.limits.lease_per_worker = RateLimit{1, 2};  // one a second, a burst of 2
  Identity identity(config);
  identity.install(ledger, 0);
  const auto lease = [&] {
    identity.throttle(Identity::Limit::kLeasePerWorker, "w-a", "lease (this worker)");
  };
  EXPECT_EQ(request_status(lease), 0);
  EXPECT_EQ(request_status(lease), 0);
  try {
    lease();
    FAIL() << "the third lease in a burst of 2 was allowed";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 429);
    EXPECT_GT(e.retry_after_ms(), 0);
  }
  // Another worker has its own bucket; a forgotten worker starts full again.
  EXPECT_EQ(request_status([&] {
              identity.throttle(Identity::Limit::kLeasePerWorker, "w-b", "lease (this worker)");
            }),
            0);
  EXPECT_EQ(identity.rate_limited().at("lease (this worker)"), 1);
  identity.forget_worker("w-a");
  EXPECT_EQ(request_status(lease), 0);
}

}  // namespace
}  // namespace stoa::hub
