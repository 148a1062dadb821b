// The task served through the hub (roles/hub/task_proxy.h): only for problems the caller holds an
// open lease on, only as itself, at a bounded rate; the answers are the hub's task's own; a task
// whose environment fails is a 502, never a decision.
#include "roles/hub/task_proxy.h"

#include "roles/hub/hub_fixture.h"
#include "roles/hub/request_status.h"

namespace stoa::hub::testing {
namespace {

class TaskProxyTest : public HubFixture {};

TEST_F(TaskProxyTest, AnswersAsTheHubsTaskForLeasedProblemsOnly) {
  open_hub();
  publish(0);
  const std::string a = join("a"), b = join("b");
  const net::LeaseResponse leased = hub->lease(a);
  ASSERT_TRUE(leased.lease.has_value());
  const net::Lease& lease = *leased.lease;
  TaskProxy proxy(*hub, RateLimit{1000, 1000});

  // The prompt and a turn, exactly as the hub's own task gives them.
  const env::QaItem problem = *hub->leased_problem(a, lease.prompt_id);
  EXPECT_EQ(proxy.prompt(a, {a, lease.prompt_id}), task->user_prompt(problem));
  const std::string action = "<search> Borvex </search>";
  const net::TaskStepReply reply = proxy.step(a, {a, lease.prompt_id, action, true});
  const env::TurnResult want = task->on_turn(problem, action, true);
  EXPECT_EQ(reply.kind, "tool");
  EXPECT_EQ(reply.tool, want.tool);
  EXPECT_EQ(reply.observation_body, want.observation.body);
  EXPECT_EQ(reply.observation_head + reply.observation_body + reply.observation_tail,
            want.observation.joined());
  const net::TaskStepReply answer =
      proxy.step(a, {a, lease.prompt_id, "<answer> migraine </answer>", true});
  EXPECT_EQ(answer.kind, "answer");
  EXPECT_TRUE(answer.done);
  EXPECT_EQ(answer.content, "migraine");
  EXPECT_EQ(proxy.calls(), 3);

  // Another worker's id, a problem not leased to the caller, an unknown one.
  EXPECT_EQ(request_status([&] { proxy.step(a, {b, lease.prompt_id, action, true}); }), 403);
  EXPECT_EQ(request_status([&] { proxy.step(b, {b, lease.prompt_id, action, true}); }), 404);
  EXPECT_EQ(request_status([&] { proxy.prompt(a, {a, "no-such-prompt"}); }), 404);
  // Once the lease is released the problem is no longer the caller's to ask about.
  hub->release(a, lease.lease_id);
  EXPECT_EQ(request_status([&] { proxy.prompt(a, {a, lease.prompt_id}); }), 404);
}

TEST_F(TaskProxyTest, AWorkerCallingTooFastIsThrottled) {
  open_hub();
  publish(0);
  const std::string a = join("a");
  const net::Lease lease = *hub->lease(a).lease;
  TaskProxy proxy(*hub, RateLimit{1, 3});  // a burst of 3, then one a second
  for (int i = 0; i < 3; ++i) EXPECT_NO_THROW(proxy.prompt(a, {a, lease.prompt_id}));
  try {
    proxy.prompt(a, {a, lease.prompt_id});
    FAIL() << "the fourth call in the same millisecond was served";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 429);
    EXPECT_GE(e.retry_after_ms(), 1);
  }
  clock += 1000;
  EXPECT_NO_THROW(proxy.prompt(a, {a, lease.prompt_id}));
}

// A task whose environment is down.
class BrokenTask final : public env::Task {
 public:
  std::string name() const override { return "search"; }
  std::string user_prompt(const env::QaItem&) const override { return "prompt"; }
  const std::vector<std::string>& stop_strings() const override { return stops_; }
  env::TurnResult on_turn(const env::QaItem&, std::string_view, bool) const override {
    throw env::EnvironmentError("environment http://127.0.0.1:1/v1/step unreachable");
  }
  double reward(std::string_view, const std::vector<std::string>&) const override { return 0; }

 private:
  std::vector<std::string> stops_{"</x>"};
};

TEST_F(TaskProxyTest, AFailingTaskIsABadGatewayNotADecision) {
  BrokenTask broken;
  HubDeps d = deps();
  d.task = &broken;
  hub = std::make_unique<Hub>(config, std::move(d));
  publish(0);
  const std::string a = join("a");
  const net::Lease lease = *hub->lease(a).lease;
  TaskProxy proxy(*hub, RateLimit{1000, 1000});
  EXPECT_EQ(request_status([&] { proxy.step(a, {a, lease.prompt_id, "x", true}); }), 502);
  EXPECT_EQ(proxy.failures(), 1);
  hub.reset();  // before the task it points to
}

}  // namespace
}  // namespace stoa::hub::testing
