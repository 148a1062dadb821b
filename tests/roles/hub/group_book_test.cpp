// The hub's groups and leases in memory (roles/hub/leasing/group_book.h): the open and complete
// lists follow the groups' status, a lease is open (and counted by fair leasing) exactly while its
// state is open, expiry closes only leases past their deadline, and what each group still needs
// is its samples less those accepted and those still out.
#include "roles/hub/leasing/group_book.h"

#include <gtest/gtest.h>

namespace stoa::hub {
namespace {

GroupRow group(const std::string& id, int32_t samples, GroupStatus status = GroupStatus::kOpen) {
  GroupRow row;
  row.id = id;
  row.prompt_id = "q-" + id;
  row.samples = samples;
  row.status = status;
  return row;
}

LeaseRow lease(const std::string& id, const std::string& group_id, const std::string& worker,
               int32_t samples, int64_t deadline_ms) {
  LeaseRow l;
  l.id = id;
  l.group_id = group_id;
  l.worker_id = worker;
  l.samples = samples;
  l.issued_ms = 0;
  l.deadline_ms = deadline_ms;
  return l;
}

TEST(GroupBook, ListsFollowTheGroupsStatus) {
  GroupBook book(LeaseCaps{});
  book.add_group(group("g1", 4));
  book.add_group(group("g2", 4, GroupStatus::kComplete));
  book.add_group(group("g3", 4));
  EXPECT_EQ(book.open_groups(), (std::vector<std::string>{"g1", "g3"}));
  EXPECT_EQ(book.queued_groups(), 1u);
  EXPECT_LT(book.groups().at("g1").order, book.groups().at("g3").order);  // creation order
  // g1 completes; g2 is trained (its status changed elsewhere): both lists follow.
  book.mark_complete(book.groups().at("g1"), 7);
  book.groups().at("g2").row.status = GroupStatus::kTrained;
  EXPECT_EQ(book.open_groups(), (std::vector<std::string>{"g3"}));
  EXPECT_EQ(book.complete_groups(), (std::vector<std::string>{"g1"}));
  EXPECT_EQ(book.groups().at("g1").complete_ticket, 7u);
}

TEST(GroupBook, ALeaseIsOpenAndCountedExactlyWhileItsStateIsOpen) {
  LeaseCaps caps;
  caps.per_worker = 1;
  GroupBook book(caps);
  book.add_group(group("g1", 4));
  book.set_lease(lease("l1", "g1", "w", 2, 1000), "10.0.0.1", 0);
  EXPECT_EQ(book.open_leases().size(), 1u);
  EXPECT_EQ(book.fairness().held("w"), 1u);
  EXPECT_TRUE(book.fairness().over_cap("w", "10.0.0.1"));
  LeaseRow done = book.leases().at("l1");
  done.state = LeaseState::kDone;
  book.set_lease(done, "", 0);
  EXPECT_TRUE(book.open_leases().empty());
  EXPECT_EQ(book.fairness().held("w"), 0u);
  EXPECT_FALSE(book.fairness().over_cap("w", "10.0.0.1"));
  EXPECT_EQ(book.leases().at("l1").state, LeaseState::kDone);  // the run's history stays
}

TEST(GroupBook, ExpiryClosesOnlyLeasesPastTheirDeadline) {
  GroupBook book(LeaseCaps{});
  book.add_group(group("g1", 4));
  book.set_lease(lease("early", "g1", "a", 2, 1000), "", 0);
  book.set_lease(lease("late", "g1", "b", 2, 5000), "", 0);
  EXPECT_TRUE(book.expire(1000).empty());  // at the deadline: still open
  const auto expired = book.expire(1001);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].id, "early");
  EXPECT_EQ(expired[0].state, LeaseState::kExpired);
  EXPECT_EQ(book.leases().at("early").state, LeaseState::kExpired);
  EXPECT_EQ(book.open_leases(), (std::set<std::string>{"late"}));
  EXPECT_EQ(book.fairness().held("a"), 0u);
}

TEST(GroupBook, NeededIsSamplesLessAcceptedLessOutstanding) {
  GroupBook book(LeaseCaps{});
  book.add_group(group("g1", 8));
  book.add_group(group("g2", 4));
  book.set_lease(lease("l1", "g1", "a", 4, 1000), "", 0);
  book.set_lease(lease("l2", "g1", "b", 2, 1000), "", 0);
  GroupState& g1 = book.groups().at("g1");
  g1.accepted = 3;  // 3 accepted on l1: 1 still out there, 2 on l2
  g1.accepted_by_lease["l1"] = 3;
  const auto outstanding = book.outstanding_by_group();
  EXPECT_EQ(outstanding.at("g1"), 3);
  EXPECT_FALSE(outstanding.count("g2"));
  EXPECT_EQ(book.needed(g1, outstanding), 8 - 3 - 3);
  EXPECT_EQ(book.needed(book.groups().at("g2"), outstanding), 4);
  // A lease that delivered more than it asked (a late result) never counts below zero.
  g1.accepted_by_lease["l2"] = 5;
  EXPECT_EQ(book.outstanding_by_group().at("g1"), 1);
}

}  // namespace
}  // namespace stoa::hub
