// RunHistory: bounded whatever the run's length, keeps the run's start and full recent
// resolution, and answers only what a polling page has not seen.
#include "roles/hub/observe/run_history.h"

#include <gtest/gtest.h>

namespace stoa::hub {
namespace {

TEST(RunHistory, AnswersOnlyPointsAfterWhatThePageHasSeen) {
  RunHistory h;
  for (int64_t s = 1; s <= 5; ++s) h.add_step({.step = s, .reward_mean = 0.1 * s});
  for (uint64_t v = 0; v < 3; ++v) h.add_version({.version = v, .patch_bytes = 10 * v});
  auto all = h.to_json();
  ASSERT_EQ(all["steps"].size(), 5u);
  ASSERT_EQ(all["versions"].size(), 3u);
  EXPECT_DOUBLE_EQ(all["steps"][4]["reward_mean"].get<double>(), 0.5);
  auto newer = h.to_json(3, 1);
  ASSERT_EQ(newer["steps"].size(), 2u);
  EXPECT_EQ(newer["steps"][0]["step"], 4);
  ASSERT_EQ(newer["versions"].size(), 1u);
  EXPECT_EQ(newer["versions"][0]["patch_bytes"], 20);
  EXPECT_TRUE(h.to_json(5, 2)["steps"].empty());
}

TEST(RunHistory, ALongRunStaysBoundedKeepsItsStartAndItsRecentSteps) {
  RunHistory h;
  const int64_t steps = 100'000;
  for (int64_t s = 1; s <= steps; ++s) h.add_step({.step = s});
  const auto j = h.to_json();
  const auto& kept = j["steps"];
  EXPECT_LE(kept.size(), RunHistory::kCapacity);
  EXPECT_GE(kept.size(), RunHistory::kCapacity / 2);
  EXPECT_EQ(kept.front()["step"], 1) << "the chart starts where the run started";
  EXPECT_EQ(kept.back()["step"], steps);
  // The most recent points are all there, in order.
  for (size_t i = kept.size() - 100; i < kept.size(); ++i)
    EXPECT_EQ(kept[i]["step"].get<int64_t>(), steps - static_cast<int64_t>(kept.size() - 1 - i));
  for (size_t i = 1; i < kept.size(); ++i)
    EXPECT_LT(kept[i - 1]["step"].get<int64_t>(), kept[i]["step"].get<int64_t>());
}

}  // namespace
}  // namespace stoa::hub
