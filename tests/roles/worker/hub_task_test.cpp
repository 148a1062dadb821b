// The task as a worker without its tools runs it (roles/worker/hub_task.h), against a real hub on a
// loopback port: the prompt of a leased problem comes from the hub once — a lease's G samples
// share it — and the hub's own rendering is what the worker gets.
#include <algorithm>

#include "roles/hub/http/server.h"
#include "roles/hub/hub_fixture.h"
#include "roles/worker/hub_task.h"

namespace stoa::worker {
namespace {

using hub::testing::HubFixture;

TEST_F(HubFixture, APromptIsAskedOfTheHubOncePerProblem) {
  open_hub();
  publish(1);
  hub::ServerOptions so;
  so.threads = 2;
  hub::HubServer server(*hub, so);
  server.start();
  net::HubClient client(server.url());
  net::JoinRequest jr;
  jr.name = "laptop";
  client.join("join-secret", jr);
  const auto lease = client.lease();
  ASSERT_TRUE(lease.lease.has_value());
  HubTask through_hub(client, "search", task->stop_strings());
  env::QaItem problem;
  problem.id = lease.lease->prompt_id;
  const uint64_t before = client.http().bytes_sent();
  const std::string first = through_hub.user_prompt(problem);
  const uint64_t after_first = client.http().bytes_sent();
  EXPECT_GT(after_first, before) << "the first ask goes to the hub";
  const std::vector<env::QaItem> prompts = deps().prompts;
  const auto leased = std::find_if(prompts.begin(), prompts.end(),
                                   [&](const env::QaItem& q) { return q.id == problem.id; });
  ASSERT_NE(leased, prompts.end());
  EXPECT_EQ(first, task->user_prompt(*leased));
  for (int sample = 1; sample < 4; ++sample) EXPECT_EQ(through_hub.user_prompt(problem), first);
  EXPECT_EQ(client.http().bytes_sent(), after_first) << "the other samples asked nothing";
  server.stop();
}

}  // namespace
}  // namespace stoa::worker
