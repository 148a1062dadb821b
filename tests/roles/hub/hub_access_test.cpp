// HubAccess (roles/hub/hub_access.h): a request's bearer token against the scope its route
// needs, on a real Hub whose operator, trainer and validate tokens are configured or in its
// ledger. Each check refuses every other scope's token, with 401 where no token of the scope
// was given and 403 where the token is valid but of another scope (the HTTP codes the routes
// answer).
#include <chrono>
#include <string>
#include <thread>

#include "net/secret.h"
#include "roles/hub/hub_fixture.h"
#include "roles/hub/request_status.h"

namespace stoa::hub::testing {
namespace {

class HubAccessTest : public HubFixture {
 protected:
  void SetUp() override {
    HubFixture::SetUp();
    config.operator_token = "op-secret";
    config.serve_trainer = true;
    config.trainer_token = "train-secret";
    Ledger cli(config.ledger_path);  // `stoa hub token add validator --scope validate`
    cli.put_join_token({"validator", net::sha256_hex("val-secret"), "validate", 1, 0});
  }
};

TEST_F(HubAccessTest, EachCheckOpensOnlyForItsScope) {
  open_hub();
  net::JoinRequest r;
  const net::JoinResponse joined = hub->join("join-secret", r);
  HubAccess& access = hub->access();

  EXPECT_EQ(access.authenticate(joined.session_token), joined.worker_id);
  for (const char* other : {"", "join-secret", "op-secret", "train-secret", "val-secret"})
    EXPECT_EQ(request_status([&] { access.authenticate(other); }), 401) << other;

  EXPECT_EQ(request_status([&] { access.check_operator("", true); }), 0);  // loopback is open
  EXPECT_EQ(request_status([&] { access.check_operator("op-secret", false); }), 0);
  for (const std::string& other : {std::string(), joined.session_token, std::string("val-secret")})
    EXPECT_EQ(request_status([&] { access.check_operator(other, false); }), 401) << other;

  EXPECT_EQ(request_status([&] { access.check_trainer("train-secret"); }), 0);
  EXPECT_EQ(request_status([&] { access.check_trainer(""); }), 401);
  for (const std::string& other : {joined.session_token, std::string("op-secret")})
    EXPECT_EQ(request_status([&] { access.check_trainer(other); }), 403) << other;

  // An operator may validate too; a validate token only that.
  for (const char* validator : {"val-secret", "op-secret"}) {
    EXPECT_TRUE(access.is_validator(validator)) << validator;
    EXPECT_EQ(request_status([&] { access.check_validator(validator); }), 0) << validator;
  }
  EXPECT_EQ(request_status([&] { access.check_validator(""); }), 401);
  for (const std::string& other : {joined.session_token, std::string("train-secret")}) {
    EXPECT_FALSE(access.is_validator(other)) << other;
    EXPECT_EQ(request_status([&] { access.check_validator(other); }), 403) << other;
  }
  // Both tokens were configured: none was made, so no file names one.
  EXPECT_EQ(access.operator_token_file(), "");
  EXPECT_EQ(access.trainer_token_file(), "");
}

TEST_F(HubAccessTest, ARevokedTokenIsRefusedAtItsNextCheck) {
  open_hub();
  ASSERT_TRUE(hub->access().is_validator("val-secret"));
  {
    Ledger cli(config.ledger_path);  // `stoa hub token revoke validator`, from another connection
    ASSERT_TRUE(cli.revoke_join_token("validator", 2));
  }
  // The Identity looks for token changes at most twice a second (on the wall clock).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (hub->access().is_validator("val-secret") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(request_status([&] { hub->access().check_validator("val-secret"); }), 403);
  EXPECT_EQ(request_status([&] { hub->access().check_validator("op-secret"); }), 0);
}

}  // namespace
}  // namespace stoa::hub::testing
