// Replay verification end to end (docs/design/verification.md): honest rollouts — a shared prompt
// forked per sample, in-flight weight switches, tool observations — all pass the hub's replay, and
// every attack of the adversarial test worker is caught: forged log-probs, a cherry-picked token,
// weights of the wrong version, one int8 weight value off by one, a forged observation, another
// worker's rollout id. A caught worker is quarantined (its session refused, its groups dropped) and
// the trainer only ever gets honest groups.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "roles/verify/replay_fixture.h"

namespace stoa::verify {
namespace {

using testing::Attack;

using testing::attack_point;
using testing::first_generated;
using testing::truncate;
using testing::Worker;

class ReplayTest : public testing::ReplayFixture {};

TEST_F(ReplayTest, HonestWorkersPassAndEveryAttackIsCaught) {
  // ---- honest: three workers, two groups each; switches before the first token (the prompt
  // under version 1, every token under 2), mid-turn, and none.
  std::vector<Worker> honest;
  std::vector<std::string> honest_ids;
  double generate_cpu = 0;
  int64_t observations = 0;
  const int64_t switches[] = {-1, 1, 5};
  for (int i = 0; i < 3; ++i) {
    honest.push_back(join("honest-" + std::to_string(i)));
    for (int g = 0; g < 2; ++g) {
      const net::Lease l = lease(honest.back());
      const double t0 = thread_cpu_seconds();
      const auto rollouts = generate(honest.back(), l, v1, &v2, switches[(i + g) % 3]);
      generate_cpu += thread_cpu_seconds() - t0;
      ASSERT_EQ(rollouts.size(), 2u);
      for (const auto& m : rollouts) {
        const auto r = submit(honest.back(), m);
        ASSERT_EQ(r.status, net::IntakeStatus::kAccepted) << r.reason << ": " << r.detail;
        honest_ids.push_back(m.id);
        for (size_t t = first_generated(m); t < m.mask.size(); ++t) observations += !m.mask[t];
      }
    }
  }
  EXPECT_GT(observations, 0) << "no tool observation was replayed";
  hub_validator->drain();
  std::vector<double> validate_cpu;
  for (const auto& id : honest_ids) {
    const hub::AuditVerdict v = verdict(id);
    EXPECT_TRUE(v.pass) << id << " at " << v.position << " (" << v.what << "): " << v.detail;
    validate_cpu.push_back(v.cpu_seconds);
  }
  // The cost figure (docs/design/verification.md). The first verdicts also pay for rebuilding the
  // versions from PULSE blobs and building their engines, once per version; the median does not.
  double total = 0;
  for (double s : validate_cpu) total += s;
  std::sort(validate_cpu.begin(), validate_cpu.end());
  const double median = validate_cpu[validate_cpu.size() / 2];
  const double per_rollout_generate = generate_cpu / static_cast<double>(honest_ids.size());
  std::printf(
      "verification cost: %.4f CPU-s to validate %zu rollouts (median %.5f each), %.4f "
      "CPU-s to generate them (%.5f each): %.1f%% in total, %.1f%% at the median\n",
      total, honest_ids.size(), median, generate_cpu, per_rollout_generate,
      100.0 * total / generate_cpu, 100.0 * median / per_rollout_generate);

  // ---- adversarial: one worker per attack; the first rollout of its group is attacked.
  std::map<Attack, Worker> attackers;
  std::map<Attack, std::string> attacked_id;
  std::map<Attack, int64_t> attacked_position;
  const pulse::Int8State skewed = testing::off_by_one(v2);
  set_hold_verdicts(true);  // every attacker submits its whole group before any quarantine
  for (Attack a : {Attack::kForgedLogprob, Attack::kCherryPick, Attack::kWrongVersion,
                   Attack::kWeightOffByOne, Attack::kForgedObservation}) {
    const Worker w = join("attacker");
    attackers[a] = w;
    const net::Lease l = lease(w);
    std::vector<net::RolloutSubmission> rollouts;
    if (a == Attack::kWrongVersion)
      rollouts = generate(w, l, v1, nullptr, -1, /*label=*/2);
    else if (a == Attack::kWeightOffByOne)
      rollouts = generate(w, l, skewed, nullptr, -1);
    else
      rollouts = generate(w, l, v2, nullptr, -1);
    net::RolloutSubmission& m = rollouts.at(0);
    const size_t p = attack_point(m);
    attacked_position[a] = -1;
    if (a == Attack::kForgedLogprob) {
      m.logprobs[p + 2] = std::nextafter(m.logprobs[p + 2], -INFINITY);
      attacked_position[a] = static_cast<int64_t>(p + 2);
    } else if (a == Attack::kCherryPick) {
      // The most likely token other than the sampled one, with its true log-prob.
      ThreadPool pool(1);
      engine::ModelRunner model(
          worker::engine_weights_from_update(config, testing::full_update(v2)), &pool);
      engine::Sequence seq = model.new_sequence(1024);
      const Tensor logits =
          model.append(seq, std::span<const int32_t>(m.tokens).first(p + 1), engine::Logits::kLast);
      engine::SamplingParams sp;
      auto dist =
          engine::sampling_distribution(std::span<const float>(logits.as<float>(), 256), sp);
      std::sort(dist.begin(), dist.end(),
                [](const auto& x, const auto& y) { return x.logprob > y.logprob; });
      const auto& alt = dist[0].token == m.tokens[p + 1] ? dist[1] : dist[0];
      m.tokens[p + 1] = alt.token;
      m.logprobs[p + 1] = alt.logprob;
      truncate(m, p + 2);
      attacked_position[a] = static_cast<int64_t>(p + 1);
    } else if (a == Attack::kForgedObservation) {
      size_t t = p;
      while (t < m.mask.size() && m.mask[t]) ++t;
      ASSERT_LT(t, m.mask.size()) << "the rollout has no observation to forge";
      m.tokens[t + 3] = m.tokens[t + 3] == 'a' ? 'b' : 'a';
      attacked_position[a] = static_cast<int64_t>(t + 3);
    }
    attacked_id[a] = m.id;
    for (const auto& r : rollouts) {
      const auto resp = submit(w, r);
      EXPECT_EQ(resp.status, net::IntakeStatus::kAccepted) << resp.reason << ": " << resp.detail;
    }
  }
  // Another worker's accepted rollout, resubmitted under its own lease.
  const Worker thief = join("thief");
  {
    const net::Lease l = lease(thief);
    net::RolloutSubmission stolen = generate(honest[0], lease(honest[0]), v2, nullptr, -1).at(0);
    ASSERT_EQ(submit(honest[0], stolen).status, net::IntakeStatus::kAccepted);
    honest_ids.push_back(stolen.id);
    stolen.worker_id = thief.id;
    stolen.lease_id = l.lease_id;
    stolen.group_id = l.group_id;
    stolen.prompt_id = l.prompt_id;
    const auto r = submit(thief, stolen);
    EXPECT_EQ(r.status, net::IntakeStatus::kRejected);
    EXPECT_EQ(r.reason, "rollout_id_taken");
  }
  set_hold_verdicts(false);
  hub_validator->drain();

  const std::map<Attack, std::string> expected_what = {{Attack::kForgedLogprob, "logprob"},
                                                       {Attack::kCherryPick, "token"},
                                                       {Attack::kWrongVersion, "logprob"},
                                                       {Attack::kWeightOffByOne, "logprob"},
                                                       {Attack::kForgedObservation, "observation"}};
  for (const auto& [a, w] : attackers) {
    const hub::AuditVerdict v = verdict(attacked_id[a]);
    EXPECT_FALSE(v.pass) << "attack " << static_cast<int>(a) << " passed replay";
    EXPECT_EQ(v.what, expected_what.at(a)) << v.detail;
    if (attacked_position[a] >= 0) {
      EXPECT_EQ(v.position, attacked_position[a]) << v.detail;
    }
    EXPECT_TRUE(hub->checks().quarantined(w.id));
    testing::expect_session_refused(*hub, w.token,
                                    "a quarantined worker's session still authenticates");
  }
  EXPECT_TRUE(hub->checks().quarantined(thief.id));
  for (const auto& w : honest) {
    EXPECT_FALSE(hub->checks().quarantined(w.id)) << w.id;
    EXPECT_EQ(hub->access().authenticate(w.token), w.id);
  }
  for (const auto& id : honest_ids) EXPECT_TRUE(verdict(id).pass) << id;

  const auto c = hub->counters();
  // Every rollout of the wrong-version and off-by-one workers fails (both of their group), one
  // of each other attacker's, and the stolen id: 2 + 2 + 3 + 1.
  EXPECT_EQ(c.at("verification_failures"), 8.0);
  EXPECT_EQ(c.at("workers_quarantined"), 6.0);
  EXPECT_EQ(c.at("groups_dropped_quarantined"), 5.0);
  const std::string metrics = hub->metrics();
  EXPECT_NE(metrics.find("stoa_rollouts_verified_total{result=\"fail\"} 8"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("stoa_workers_quarantined 6"), std::string::npos);

  // The trainer gets the six honest groups, never an attacker's.
  const auto groups = hub->take_groups(100, std::chrono::milliseconds(0));
  EXPECT_EQ(groups.size(), 6u);
  for (const auto& g : groups)
    for (const auto& r : g.rollouts) {
      bool is_honest = false;
      for (const auto& w : honest) is_honest |= r.worker_id == w.id;
      EXPECT_TRUE(is_honest) << "group " << g.group_id << " holds " << r.worker_id << "'s rollout";
    }
}

// A rollout naming a version no route in the store reaches (pruned while it waited, in a run):
// the replay cannot run, the hub's own limit, which blames nobody.
TEST_F(ReplayTest, AVersionTheStoreCannotReachIsUnreplayable) {
  const Worker w = join("w");
  const net::Lease l = lease(w);
  const size_t prompt_length = l.prompt_tokens.size();
  net::RolloutSubmission gone = generate(w, l, v2, nullptr, -1, /*label=*/7).at(0);
  const Verdict aged = validator->check(gone, problem(l), prompt_length);
  EXPECT_FALSE(aged.pass);
  EXPECT_EQ(aged.what, hub::kUnreplayableVerdict) << aged.detail;
  EXPECT_TRUE(hub::verdict_blames_nobody(hub::audit_verdict(aged)));

  // The same rollout under the version that computed it passes.
  const net::RolloutSubmission kept = generate(w, l, v2, nullptr, -1).at(0);
  EXPECT_TRUE(validator->check(kept, problem(l), prompt_length).pass);
}

TEST_F(ReplayTest, SeedsAreTheLeases) {
  const Worker w = join("w");
  const net::Lease l = lease(w);
  auto rollouts = generate(w, l, v2, nullptr, -1);
  net::RolloutSubmission m = rollouts.at(0);
  m.seed = *m.seed + 1;  // a seed of the worker's choosing
  auto r = submit(w, m);
  EXPECT_EQ(r.status, net::IntakeStatus::kRejected);
  EXPECT_EQ(r.reason, "bad_seed");
  ASSERT_EQ(submit(w, rollouts.at(0)).status, net::IntakeStatus::kAccepted);
  m = rollouts.at(1);
  m.id = net::random_uuid();
  m.seed = rollouts.at(0).seed;  // the same sample twice
  r = submit(w, m);
  EXPECT_EQ(r.reason, "bad_seed");
  m.seed.reset();
  EXPECT_EQ(submit(w, m).reason, "bad_seed");
}

}  // namespace
}  // namespace stoa::verify
