// The ledger as the hub uses it (roles/hub/ledger/run_ledger.h): an accepted rollout is readable
// while its write waits in the group commit and after it is durable, a completion is reported
// once durable, and a queue full of writes is answered 503 with Retry-After.
#include "roles/hub/ledger/run_ledger.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "roles/hub/request_error.h"
#include "support/temp_dir.h"

namespace stoa::hub {
namespace {

RolloutRow rollout(const std::string& id, const std::string& group_id) {
  RolloutRow row;
  row.id = id;
  row.group_id = group_id;
  row.lease_id = "l1";
  row.worker_id = "w1";
  row.payload = "{}";
  return row;
}

// A write that holds the writer's thread until `release` is set: what waits behind it stays
// queued, not durable, for as long as the test needs.
LedgerWriter::Write blocking_write(std::shared_future<void> release) {
  return [release](Ledger&) { release.wait(); };
}

class RunLedgerTest : public ::testing::Test {
 protected:
  RunLedgerTest() : dir("run-ledger") {}
  testing::TempDir dir;
};

TEST_F(RunLedgerTest, AHeldRolloutIsReadBeforeAndAfterItIsDurable) {
  RunLedger ledger(dir.file("ledger.db"), 64);
  std::atomic<int> commits{0};
  ledger.start([&] { commits++; });
  std::promise<void> release;
  ledger.write(blocking_write(release.get_future().share()));
  GroupRow group;
  group.id = "g1";
  auto row = std::make_shared<const RolloutRow>(rollout("r1", "g1"));
  const uint64_t ticket = ledger.write([row, group](Ledger& l) {
    l.put_group(group);
    l.insert_rollout(*row);
  });
  ledger.hold_rollout(row, ticket);
  ledger.hold_completion(ticket);
  // Queued, not durable: the reader does not see it, the RunLedger does.
  EXPECT_FALSE(ledger.reader().rollout("r1"));
  ASSERT_TRUE(ledger.rollout("r1"));
  EXPECT_EQ(ledger.rollouts_of_group("g1").size(), 1u);
  EXPECT_FALSE(ledger.forget_durable());  // the completion is not durable yet
  release.set_value();
  ledger.wait_durable(ticket);
  EXPECT_GE(ledger.durable(), ticket);
  EXPECT_TRUE(ledger.forget_durable());  // now it is, once
  EXPECT_FALSE(ledger.forget_durable());
  // Durable: from the reader, and listed once though it was held too.
  EXPECT_TRUE(ledger.reader().rollout("r1"));
  EXPECT_EQ(ledger.rollouts_of_group("g1").size(), 1u);
  EXPECT_GE(commits.load(), 1);
}

TEST_F(RunLedgerTest, AFullQueueIsAnswered503AndCounted) {
  RunLedger ledger(dir.file("ledger.db"), 3);
  ledger.start([] {});
  std::promise<void> release;
  ledger.write(blocking_write(release.get_future().share()));
  ledger.reserve();  // one pending of 3: room
  ledger.write([](Ledger&) {});
  ledger.write([](Ledger&) {});
  try {
    ledger.reserve();
    FAIL() << "a full queue was not refused";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.retry_after_ms(), 1000);
  }
  EXPECT_EQ(ledger.busy(), 1);
  release.set_value();
  ledger.wait_durable(ledger.written());
  ledger.reserve();  // drained: room again
  EXPECT_EQ(ledger.stats().pending, 0u);
}

TEST_F(RunLedgerTest, StopCommitsWhatIsQueued) {
  {
    RunLedger ledger(dir.file("ledger.db"), 64);
    ledger.start([] {});
    GroupRow group;
    group.id = "g1";
    ledger.write([group](Ledger& l) { l.put_group(group); });
    ledger.stop();
    ledger.stop();  // idempotent
  }
  Ledger reopened(dir.file("ledger.db"));
  EXPECT_EQ(reopened.groups().size(), 1u);
}

}  // namespace
}  // namespace stoa::hub
