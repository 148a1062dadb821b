// Peer checks in one process (docs/design/verification.md, "Peer checks"): a real Hub with
// [verify] peer, real PULSE blobs, rollouts generated through the worker's own EpisodeRunner,
// the hub's trusted replay on its validator thread, and checkers that replay leased jobs with
// their own ReplayValidator (what a worker's check thread does) — or lie. Every rollout past a
// worker's first group waits for a check before its group may train; a checker never gets its
// own rollouts and checks no more than its own checked work earns; a forger is caught by an
// honest checker, a checker that fails an honest rollout or passes a forged one by the hub's
// replay; checks not answered or not taken in time go to the hub's replay.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "roles/verify/replay_fixture.h"

namespace stoa::verify {
namespace {

using testing::attack_point;
using testing::Worker;

class PeerTest : public testing::ReplayFixture {
 protected:
  void configure(hub::HubConfig& hc, hub::HubDeps& deps) override {
    hc.verify.peer = true;
    hc.verify.first_rollouts = 2;  // a worker's first group: the hub's own replay
    hc.verify.audit_fraction = audit_fraction();
    hc.verify.check_allowance = 0;
    hc.verify.check_share = 1.0;
    hc.verify.max_checks_in_flight = 4;
    hc.verify.canary_fraction = canary_fraction();
    clock_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
    deps.clock_ms = [this] { return clock_ms.load(); };
  }
  virtual double audit_fraction() const { return 0.0; }
  virtual double canary_fraction() const { return 0.0; }
  void SetUp() override {
    ReplayFixture::SetUp();
    peer_states = std::make_unique<VersionStates>(*store);
    peer = std::make_unique<ReplayValidator>(config, *task, codec, replay_settings, *peer_states);
  }

  // A group generated under version 2 and submitted; `forge` changes one log-prob of its first
  // rollout by one ulp. Returns the rollout ids.
  std::vector<std::string> submit_group(const Worker& w, bool forge = false,
                                        const std::string& address = "") {
    const net::Lease l = lease(w);
    auto rollouts = generate(w, l, v2, nullptr, -1);
    if (forge) {
      net::RolloutSubmission& m = rollouts.at(0);
      const size_t p = attack_point(m) + 2;
      m.logprobs[p] = std::nextafter(m.logprobs[p], -INFINITY);
    }
    std::vector<std::string> ids;
    for (const auto& m : rollouts) {
      const auto r = hub->submit(w.id, m, address);
      EXPECT_EQ(r.status, net::IntakeStatus::kAccepted) << r.reason << ": " << r.detail;
      ids.push_back(m.id);
      submitted[*m.seed] = {w.id, m.id};
    }
    return ids;
  }
  // A check job names neither its author nor the rollout (blind_check_job): the test knows them
  // by the seed, which only that rollout drew with.
  std::string author_of(const hub::CheckLease& l) {
    return submitted.at(l.job.rollout.seed.value()).first;
  }
  std::string rollout_of(const hub::CheckLease& l) {
    return submitted.at(l.job.rollout.seed.value()).second;
  }
  // `author` and `checker` past their first groups, a group of the author's waiting for its
  // checks (its rollout ids), and the checker's lease on one of them.
  std::pair<std::vector<std::string>, hub::CheckLease> one_check(const Worker& author,
                                                                 const Worker& checker) {
    first_groups({author, checker});
    EXPECT_EQ(takeable(), 2u);
    auto ids = submit_group(author);
    auto l = hub->checks().lease_check(checker.id);
    if (!l) throw std::runtime_error("the checker got no check lease");
    return {std::move(ids), std::move(*l)};
  }
  // Each worker's first group, through the hub's replay: it earns the worker its checks.
  void first_groups(const std::vector<Worker>& workers) {
    for (const auto& w : workers) submit_group(w);
    hub_validator->drain();
    for (const auto& w : workers) ASSERT_FALSE(hub->checks().quarantined(w.id));
  }
  // The checker's honest replay of a leased job.
  hub::AuditVerdict replay(const hub::CheckLease& l) {
    const Verdict v = peer->check(l.job.rollout, l.job.problem, l.job.prompt_length);
    return {v.pass, v.position, v.what, v.detail, v.cpu_seconds};
  }
  double counter(const std::string& name) {
    const auto c = hub->counters();
    return c.count(name) ? c.at(name) : 0.0;
  }
  size_t takeable() { return hub->take_groups(100, std::chrono::milliseconds(0)).size(); }

  std::map<uint64_t, std::pair<std::string, std::string>> submitted;  // seed -> author, rollout
  std::atomic<int64_t> clock_ms{0};
  std::unique_ptr<VersionStates> peer_states;
  std::unique_ptr<ReplayValidator> peer;
};

TEST_F(PeerTest, EveryRolloutIsCheckedByAnotherWorkerBeforeItTrains) {
  const std::vector<Worker> w = {join("a"), join("b"), join("c")};
  first_groups(w);
  EXPECT_EQ(takeable(), 3u);  // the first groups, replayed by the hub
  std::set<std::string> waiting;
  for (const auto& x : w)
    for (const auto& id : submit_group(x)) waiting.insert(id);
  EXPECT_EQ(takeable(), 0u) << "a group trained before its rollouts were checked";
  EXPECT_EQ(hub->checks().checks_waiting(), 6u);
  // Worker a earned two checks (its two rollouts that passed) and gets two of b's and c's, never
  // its own; a third is refused although four wait.
  std::vector<hub::CheckLease> mine;
  for (int i = 0; i < 2; ++i) {
    auto l = hub->checks().lease_check(w[0].id);
    ASSERT_TRUE(l.has_value());
    EXPECT_NE(author_of(*l), w[0].id) << "a worker was given its own rollout";
    mine.push_back(*l);
  }
  EXPECT_FALSE(hub->checks().lease_check(w[0].id).has_value()) << "checks past the worker's share";
  for (const auto& l : mine) {
    EXPECT_EQ(hub->checks().record_check(w[0].id, l.job_id, replay(l)), rollout_of(l));
    waiting.erase(rollout_of(l));
  }
  for (int round = 0; round < 8 && !waiting.empty(); ++round) {
    for (const auto& x : {w[1], w[2]}) {
      auto l = hub->checks().lease_check(x.id);
      if (!l) continue;
      EXPECT_NE(author_of(*l), x.id);
      hub->checks().record_check(x.id, l->job_id, replay(*l));
      waiting.erase(rollout_of(*l));
    }
  }
  EXPECT_TRUE(waiting.empty()) << waiting.size() << " rollouts never checked";
  EXPECT_EQ(takeable(), 3u);
  EXPECT_EQ(counter("peer_checks_passed"), 6.0);
  EXPECT_EQ(counter("checks_escalated"), 0.0);
  EXPECT_EQ(counter("workers_quarantined"), 0.0);
  // A verdict on a check already answered, or by someone who does not hold it, is refused.
  try {
    hub->checks().record_check(w[1].id, mine[0].job_id, replay(mine[0]));
    ADD_FAILURE() << "a verdict on another worker's check was taken";
  } catch (const hub::RequestError& e) {
    EXPECT_EQ(e.status(), 404);
  }
}

TEST_F(PeerTest, TheHubsReplayDecidesADisagreementAndQuarantinesTheLiar) {
  const Worker honest = join("honest"), forger = join("forger"), liar = join("liar"),
               other = join("other");
  first_groups({honest, forger, liar, other});
  EXPECT_EQ(takeable(), 4u);
  // The forger's group: only `honest` may check it now (the others wait their turn below).
  const auto forged = submit_group(forger, /*forge=*/true);
  set_hold_verdicts(true);  // both checks answered before the forger's quarantine drops its group
  for (int i = 0; i < 2; ++i) {
    auto l = hub->checks().lease_check(honest.id);
    ASSERT_TRUE(l.has_value());
    EXPECT_EQ(author_of(*l), forger.id);
    const hub::AuditVerdict v = replay(*l);
    EXPECT_EQ(v.pass, rollout_of(*l) != forged[0]) << v.what << " " << v.detail;
    hub->checks().record_check(honest.id, l->job_id, v);
  }
  set_hold_verdicts(false);
  hub_validator->drain();  // the disagreement, replayed by the hub
  EXPECT_TRUE(hub->checks().quarantined(forger.id));
  EXPECT_FALSE(hub->checks().quarantined(honest.id));
  // A liar fails an honest group: the hub's replay passes it, the liar is quarantined and the
  // group trains.
  submit_group(other);
  for (int i = 0; i < 2; ++i) {
    auto l = hub->checks().lease_check(liar.id);
    ASSERT_TRUE(l.has_value());
    hub->checks().record_check(liar.id, l->job_id, {false, 5, "logprob", "a lie", 0.0});
  }
  hub_validator->drain();
  EXPECT_TRUE(hub->checks().quarantined(liar.id));
  EXPECT_FALSE(hub->checks().quarantined(other.id));
  EXPECT_EQ(counter("peer_checks_failed"), 3.0);  // the forged rollout and the liar's two
  EXPECT_EQ(counter("checks_escalated_disagreement"), 3.0);
  EXPECT_EQ(counter("checkers_quarantined"), 1.0);
  const auto groups = hub->take_groups(100, std::chrono::milliseconds(0));
  ASSERT_EQ(groups.size(), 1u);
  for (const auto& r : groups[0].rollouts) EXPECT_EQ(r.worker_id, other.id);
}

// Every pass audited: a colluding checker that passes its team's forged rollout is caught with it.
class AuditedPeerTest : public PeerTest {
  double audit_fraction() const override { return 1.0; }
};

TEST_F(AuditedPeerTest, ACheckerThatPassesAForgeryIsQuarantinedWithItsAuthor) {
  const Worker forger = join("forger"), colluder = join("colluder"), honest = join("honest");
  first_groups({forger, colluder, honest});
  EXPECT_EQ(takeable(), 3u);
  submit_group(forger, /*forge=*/true);
  // Both checks answered before the first audit's verdict quarantines the colluder (the hub's
  // replay runs on its own thread: seen once in CI taking the second check away).
  set_hold_verdicts(true);
  for (int i = 0; i < 2; ++i) {
    auto l = hub->checks().lease_check(colluder.id);
    ASSERT_TRUE(l.has_value());
    hub->checks().record_check(colluder.id, l->job_id, {true, -1, "", "", 0.0});  // "looks fine"
  }
  EXPECT_EQ(takeable(), 0u) << "an audited pass released its group before the hub's verdict";
  set_hold_verdicts(false);
  hub_validator->drain();
  EXPECT_TRUE(hub->checks().quarantined(forger.id));
  EXPECT_TRUE(hub->checks().quarantined(colluder.id));
  EXPECT_FALSE(hub->checks().quarantined(honest.id));
  EXPECT_EQ(counter("checks_escalated_audit"), 2.0);
  EXPECT_EQ(takeable(), 0u) << "the forged group trained";
}

TEST_F(PeerTest, ChecksNotAnsweredOrNotTakenInTimeGoToTheHubsReplay) {
  const Worker author = join("author"), slow = join("slow");
  const auto [ids, l] = one_check(author, slow);
  clock_ms += hub_config.verify.peer_lease_ms + 1000;  // past both deadlines
  EXPECT_EQ(takeable(), 0u);                           // the sweep escalates both
  EXPECT_EQ(counter("checks_escalated_check_timeout"), 1.0);
  EXPECT_EQ(counter("checks_escalated_unclaimed"), 1.0);
  try {
    hub->checks().record_check(slow.id, l.job_id, replay(l));
    ADD_FAILURE() << "a verdict past the check's deadline was taken";
  } catch (const hub::RequestError& e) {
    EXPECT_EQ(e.status(), 409);
  }
  hub_validator->drain();
  EXPECT_EQ(takeable(), 1u);
  EXPECT_FALSE(hub->checks().quarantined(slow.id)) << "a late checker said nothing against anyone";
  EXPECT_FALSE(hub->checks().quarantined(author.id));
}

TEST_F(PeerTest, ACheckerSharingTheAuthorsAddressIsPassedOverWhileAnotherCanCheck) {
  const Worker author = join("author", "10.0.0.1"), neighbour = join("neighbour", "10.0.0.1"),
               stranger = join("stranger", "10.0.0.2");
  for (const auto& [w, address] : std::vector<std::pair<Worker, std::string>>{
           {author, "10.0.0.1"}, {neighbour, "10.0.0.1"}, {stranger, "10.0.0.2"}})
    submit_group(w, false, address);
  hub_validator->drain();
  EXPECT_EQ(takeable(), 3u);
  submit_group(author, false, "10.0.0.1");
  EXPECT_FALSE(hub->checks().lease_check(neighbour.id, "10.0.0.1").has_value());
  auto l = hub->checks().lease_check(stranger.id, "10.0.0.2");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(author_of(*l), author.id);
}

// A trusted replay with no room (its queue full): escalations wait, their groups held, and go
// over as it drains — a busy hub drops nothing it could still check.
class FullAuditor final : public hub::RolloutAuditor {
 public:
  bool enqueue(hub::AuditJob job) override {
    if (!room) return false;
    taken.push_back(std::move(job));
    return true;
  }
  bool room = false;
  std::vector<hub::AuditJob> taken;
};

TEST_F(PeerTest, EscalationsWaitWhileTheHubsReplayIsBehind) {
  const Worker author = join("author"), checker = join("checker");
  first_groups({author, checker});
  EXPECT_EQ(takeable(), 2u);
  FullAuditor full;
  hub->checks().set_auditor(&full);
  submit_group(author);
  for (int i = 0; i < 2; ++i) {
    auto l = hub->checks().lease_check(checker.id);
    ASSERT_TRUE(l.has_value());
    hub->checks().record_check(checker.id, l->job_id, {false, 3, "logprob", "says it fails", 0.0});
  }
  EXPECT_EQ(counter("checks_escalation_backlog"), 2.0);
  EXPECT_EQ(takeable(), 0u);
  EXPECT_EQ(counter("groups_dropped_unchecked"), 0.0);
  full.room = true;
  clock_ms += 1000;  // the next sweep hands the backlog over
  EXPECT_EQ(takeable(), 0u);
  ASSERT_EQ(full.taken.size(), 2u);
  EXPECT_EQ(counter("checks_escalation_backlog"), 0.0);
  for (const auto& job : full.taken)
    hub->checks().record_verdict(job.rollout.id, {true, -1, "", "", 0.0});
  EXPECT_EQ(takeable(), 1u) << "the group trains once the hub's replay passed it";
  EXPECT_TRUE(hub->checks().quarantined(checker.id)) << "it failed an honest group";
  EXPECT_FALSE(hub->checks().quarantined(author.id));
}

TEST_F(PeerTest, ACheckJobNamesNeitherItsAuthorNorAnythingTheAuthorChose) {
  const Worker author = join("author"), checker = join("checker");
  const auto [ids, l] = one_check(author, checker);
  const net::RolloutSubmission& r = l.job.rollout;
  EXPECT_TRUE(net::looks_like_uuid(r.id)) << r.id;
  EXPECT_EQ(std::find(ids.begin(), ids.end(), r.id), ids.end()) << "the author's rollout id";
  for (const std::string* field : {&r.worker_id, &r.lease_id, &r.group_id})
    EXPECT_EQ(*field, "blinded");
  EXPECT_TRUE(r.answer.empty() && r.kernel_target.empty());
  EXPECT_EQ(r.turns, 0);
  EXPECT_EQ(r.timings.started_unix_ms, 0);
  EXPECT_EQ(r.timings.generate_ms, 0.0);
  EXPECT_NE(std::find(ids.begin(), ids.end(), rollout_of(l)), ids.end());
  // It is a valid rollout on the wire (a worker parses it) and what the replay needs is all
  // there: the blinded job replays and passes.
  EXPECT_NO_THROW(net::rollout_submission_from_json(net::to_json(r)));
  const hub::AuditVerdict v = replay(l);
  EXPECT_TRUE(v.pass) << v.what << " " << v.detail;
  EXPECT_EQ(hub->checks().record_check(checker.id, l.job_id, v), rollout_of(l));
}

// Every check lease handed out while real jobs wait is a canary: a rollout the hub's replay
// passed, one log-prob nudged.
class CanaryPeerTest : public PeerTest {
  double canary_fraction() const override { return 1.0; }
};

TEST_F(CanaryPeerTest, AnHonestReplayFailsACanaryAndACheckerThatPassesOneIsQuarantined) {
  const Worker author = join("author"), honest = join("honest"), lazy = join("lazy");
  first_groups({author, honest, lazy});  // the hub's replay passes them: canary sources
  EXPECT_EQ(takeable(), 3u);
  EXPECT_EQ(counter("canary_sources"), 6.0);
  EXPECT_EQ(counter("canary_checks_leased"), 0.0);
  submit_group(author);  // real jobs wait: a lease may now be a canary
  auto c = hub->checks().lease_check(honest.id);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(counter("canary_checks_leased"), 1.0);
  EXPECT_EQ(c->job.rollout.worker_id, "blinded") << "a canary is blinded like any check";
  EXPECT_NE(author_of(*c), honest.id) << "a canary made of the checker's own rollout";
  const hub::AuditVerdict v = replay(*c);
  EXPECT_FALSE(v.pass) << "an exact replay passed a nudged log-prob";
  EXPECT_EQ(v.what, "logprob");
  hub->checks().record_check(honest.id, c->job_id, v);
  EXPECT_EQ(counter("canary_checks_caught"), 1.0);
  EXPECT_FALSE(hub->checks().quarantined(honest.id));
  EXPECT_EQ(counter("peer_checks_failed"), 0.0) << "a canary's verdict is not a disagreement";
  EXPECT_EQ(counter("checks_escalated"), 0.0);
  // A checker that does not replay and passes: quarantined on its first canary.
  auto lazy_check = hub->checks().lease_check(lazy.id);
  ASSERT_TRUE(lazy_check.has_value());
  hub->checks().record_check(lazy.id, lazy_check->job_id, {true, -1, "", "", 0.0});
  EXPECT_TRUE(hub->checks().quarantined(lazy.id));
  EXPECT_EQ(counter("canary_checks_passed"), 1.0);
  EXPECT_EQ(counter("checkers_quarantined"), 1.0);
  EXPECT_FALSE(hub->checks().quarantined(author.id))
      << "the canary's source author is not to blame";
  // Each source is used once; the real jobs are still checked, by honest checkers.
  EXPECT_EQ(counter("canary_sources"), 4.0);
  EXPECT_EQ(hub->checks().checks_waiting(), 2u);
}

TEST_F(CanaryPeerTest, ACanaryNotAnsweredInTimeExpiresAndALateVerdictIsRefused) {
  const Worker author = join("author"), checker = join("checker");
  const auto [ids, c] = one_check(author, checker);
  ASSERT_EQ(counter("canary_checks_leased"), 1.0);
  clock_ms += hub_config.verify.peer_lease_ms + 1000;
  takeable();  // a sweep
  EXPECT_EQ(counter("canary_checks_expired"), 1.0);
  try {
    hub->checks().record_check(checker.id, c.job_id, {true, -1, "", "", 0.0});
    ADD_FAILURE() << "a verdict on an expired canary was taken";
  } catch (const hub::RequestError& e) {
    EXPECT_EQ(e.status(), 409);
  }
  EXPECT_FALSE(hub->checks().quarantined(checker.id)) << "a late checker said nothing";
}

TEST_F(PeerTest, AHubWithoutPeerChecksAnswers404) {
  hub::HubConfig off = hub_config;
  off.verify.peer = false;
  off.ledger_path = *dir / "off.sqlite";
  hub::HubDeps deps;
  deps.task = task.get();
  deps.codec = &codec;
  deps.vocab_size = config.vocab_size;
  deps.prompts = prompts;
  deps.store = store.get();
  hub::Hub plain(off, deps);
  try {
    plain.checks().lease_check("w-any");
    ADD_FAILURE() << "a hub without peer checks leased one";
  } catch (const hub::RequestError& e) {
    EXPECT_EQ(e.status(), 404);
  }
}

}  // namespace
}  // namespace stoa::verify
