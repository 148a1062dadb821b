// The one run.toml writer: a RunConfig built in code, written by to_toml and read back by
// parse_run_config, is the same config in every field — the keys the file carries, the values
// derived from them, and the ones the file does not carry (left at their defaults).
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "roles/run/minimal_run_config.h"
#include "roles/run/run_config.h"

namespace stoa::run {
namespace {

// Every field of RunConfig and of the option structs inside it.
void expect_same(const RunConfig& a, const RunConfig& b) {
  EXPECT_EQ(a.run_dir, b.run_dir);
  EXPECT_EQ(a.model_dir, b.model_dir);
  EXPECT_EQ(a.data_dir, b.data_dir);
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.task_options.values(), b.task_options.values());
  EXPECT_EQ(a.max_queued_groups, b.max_queued_groups);
  EXPECT_EQ(a.eval.every_steps, b.eval.every_steps);
  EXPECT_EQ(a.eval.questions, b.eval.questions);
  EXPECT_EQ(a.eval.limit, b.eval.limit);
  EXPECT_EQ(a.eval.pass_at, b.eval.pass_at);
  EXPECT_EQ(a.eval.samples, b.eval.samples);
  EXPECT_EQ(a.eval.temperature, b.eval.temperature);
  EXPECT_EQ(a.eval.success_reward, b.eval.success_reward);
  EXPECT_EQ(a.eval.batch, b.eval.batch);
  EXPECT_EQ(a.eval.seed, b.eval.seed);

  EXPECT_EQ(a.hub.ledger_path, b.hub.ledger_path);
  EXPECT_EQ(a.hub.join_token, b.hub.join_token);
  EXPECT_EQ(a.hub.group_size, b.hub.group_size);
  EXPECT_EQ(a.hub.sampling.temperature, b.hub.sampling.temperature);
  EXPECT_EQ(a.hub.sampling.top_p, b.hub.sampling.top_p);
  EXPECT_EQ(a.hub.sampling.top_k, b.hub.sampling.top_k);
  EXPECT_EQ(a.hub.sampling.max_new_tokens, b.hub.sampling.max_new_tokens);
  EXPECT_EQ(a.hub.sampling.max_turns, b.hub.sampling.max_turns);
  EXPECT_EQ(a.hub.sampling.max_observation_tokens, b.hub.sampling.max_observation_tokens);
  EXPECT_EQ(a.hub.lease_ttl_ms, b.hub.lease_ttl_ms);
  EXPECT_EQ(a.hub.lease_max_ms, b.hub.lease_max_ms);
  EXPECT_EQ(a.hub.max_staleness, b.hub.max_staleness);
  EXPECT_EQ(a.hub.max_tokens, b.hub.max_tokens);
  EXPECT_EQ(a.hub.topk, b.hub.topk);
  EXPECT_EQ(a.hub.max_open_groups, b.hub.max_open_groups);
  EXPECT_EQ(a.hub.max_queued_groups, b.hub.max_queued_groups);
  EXPECT_EQ(a.hub.heartbeat_interval_s, b.hub.heartbeat_interval_s);
  EXPECT_EQ(a.hub.no_work_retry_ms, b.hub.no_work_retry_ms);
  EXPECT_EQ(a.hub.seed, b.hub.seed);
  EXPECT_EQ(a.hub.swarm, b.hub.swarm);
  EXPECT_EQ(a.hub.swarm_web_seed_copies, b.hub.swarm_web_seed_copies);
  EXPECT_EQ(a.hub.swarm_web_seed_budget, b.hub.swarm_web_seed_budget);
  EXPECT_EQ(a.hub.swarm_reseed_after_s, b.hub.swarm_reseed_after_s);

  EXPECT_EQ(a.server.host, b.server.host);
  EXPECT_EQ(a.server.port, b.server.port);
  EXPECT_EQ(a.server.threads, b.server.threads);
  EXPECT_EQ(a.server.max_body_bytes, b.server.max_body_bytes);
  EXPECT_EQ(a.server.max_long_poll_s, b.server.max_long_poll_s);
  EXPECT_EQ(a.server.tls_cert_path, b.server.tls_cert_path);
  EXPECT_EQ(a.server.tls_key_path, b.server.tls_key_path);

  const train::TrainOptions &ta = a.train, &tb = b.train;
  EXPECT_EQ(ta.device, tb.device);
  EXPECT_EQ(ta.compute_dtype, tb.compute_dtype);
  EXPECT_EQ(ta.threads, tb.threads);
  EXPECT_EQ(ta.optimizer.lr, tb.optimizer.lr);
  EXPECT_EQ(ta.optimizer.beta1, tb.optimizer.beta1);
  EXPECT_EQ(ta.optimizer.beta2, tb.optimizer.beta2);
  EXPECT_EQ(ta.optimizer.eps, tb.optimizer.eps);
  EXPECT_EQ(ta.optimizer.weight_decay, tb.optimizer.weight_decay);
  EXPECT_EQ(ta.optimizer.max_grad_norm, tb.optimizer.max_grad_norm);
  EXPECT_EQ(ta.schedule.kind, tb.schedule.kind);
  EXPECT_EQ(ta.schedule.warmup_steps, tb.schedule.warmup_steps);
  EXPECT_EQ(ta.schedule.total_steps, tb.schedule.total_steps);
  EXPECT_EQ(ta.schedule.min_lr_ratio, tb.schedule.min_lr_ratio);
  EXPECT_EQ(ta.loss.kind, tb.loss.kind);
  EXPECT_EQ(ta.loss.delta_hi, tb.loss.delta_hi);
  EXPECT_EQ(ta.loss.delta_lo, tb.loss.delta_lo);
  EXPECT_EQ(ta.loss.clip_eps_hi, tb.loss.clip_eps_hi);
  EXPECT_EQ(ta.loss.clip_eps_lo, tb.loss.clip_eps_lo);
  EXPECT_EQ(ta.loss.ratio_cap, tb.loss.ratio_cap);
  EXPECT_EQ(ta.loss.advantage, tb.loss.advantage);
  EXPECT_EQ(ta.loss.aggregation, tb.loss.aggregation);
  EXPECT_EQ(ta.loss.sequence_constant, tb.loss.sequence_constant);
  EXPECT_EQ(ta.loss.kl_eps, tb.loss.kl_eps);
  EXPECT_EQ(ta.micro_batch_tokens, tb.micro_batch_tokens);
  EXPECT_EQ(ta.max_sequence_tokens, tb.max_sequence_tokens);
  EXPECT_EQ(ta.seed, tb.seed);
  EXPECT_EQ(ta.temperature, tb.temperature);

  const trainer::TrainerLoopOptions &la = a.loop, &lb = b.loop;
  EXPECT_EQ(la.staleness.max_staleness, lb.staleness.max_staleness);
  EXPECT_EQ(la.groups_per_step, lb.groups_per_step);
  EXPECT_EQ(la.min_groups, lb.min_groups);
  EXPECT_EQ(la.skip_uniform_groups, lb.skip_uniform_groups);
  EXPECT_EQ(la.no_signal_warn_steps, lb.no_signal_warn_steps);
  EXPECT_EQ(la.gather_timeout, lb.gather_timeout);
  EXPECT_EQ(la.poll, lb.poll);
  EXPECT_EQ(la.checkpoint_every, lb.checkpoint_every);
  EXPECT_EQ(la.checkpoint_dir, lb.checkpoint_dir);
  EXPECT_EQ(la.log_path, lb.log_path);
  EXPECT_EQ(la.publisher.anchor_every, lb.publisher.anchor_every);
  EXPECT_EQ(la.publisher.retention.keep_anchors, lb.publisher.retention.keep_anchors);
  EXPECT_EQ(la.publisher.encode.coding, lb.publisher.encode.coding);
  EXPECT_EQ(la.publisher.encode.zstd_level, lb.publisher.encode.zstd_level);
  EXPECT_EQ(la.max_steps, lb.max_steps);
  const auto &va = a.hub.verify, &vb = b.hub.verify;
  EXPECT_EQ(va.enabled, vb.enabled);
  EXPECT_EQ(va.fraction, vb.fraction);
  EXPECT_EQ(va.first_rollouts, vb.first_rollouts);
  EXPECT_EQ(va.max_wait_ms, vb.max_wait_ms);
  EXPECT_EQ(va.train_on_timeout, vb.train_on_timeout);
  EXPECT_EQ(va.threads, vb.threads);
  EXPECT_EQ(va.max_queue, vb.max_queue);
  EXPECT_EQ(va.remote, vb.remote);
  EXPECT_EQ(va.job_lease_ms, vb.job_lease_ms);
}

// Every key the file carries set away from its default.
RunConfig every_key_set() {
  RunConfig c;
  c.run_dir = "/runs/x/run";
  c.model_dir = "/models/m";
  c.data_dir = "/data/d";
  c.task = "search";
  c.task_options.set("index", "/data/d/bm25");
  c.task_options.set("topk", "5");
  c.loop.max_steps = 17;
  c.server.host = "0.0.0.0";
  c.server.port = 8123;
  c.server.threads = 5;
  c.server.tls_cert_path = "/tls/cert.pem";
  c.server.tls_key_path = "/tls/key.pem";
  c.hub.join_token = "a \"quoted\" token\\with = and # and ünïcode";
  c.hub.group_size = 6;
  c.hub.lease_ttl_ms = 45'000;
  c.hub.lease_max_ms = 900'000;
  c.hub.max_open_groups = 9;
  c.max_queued_groups = 11;
  c.hub.max_tokens = 3000;
  c.hub.topk = 4;
  c.hub.seed = 77;
  c.hub.heartbeat_interval_s = 3;
  c.hub.swarm = false;
  c.hub.swarm_web_seed_copies = 3;
  c.hub.swarm_web_seed_budget = 1.25;
  c.hub.swarm_reseed_after_s = 9;
  c.hub.sampling.temperature = 0.7f;
  c.hub.sampling.top_p = 0.95f;
  c.hub.sampling.top_k = 40;
  c.hub.sampling.max_new_tokens = 96;
  c.hub.sampling.max_turns = 3;
  c.hub.sampling.max_observation_tokens = 200;
  c.train.device = "cuda:1";
  c.train.threads = 3;
  c.train.optimizer.lr = 3.0e-5 / 7;  // not short in decimal: the writer must keep every bit
  c.train.optimizer.weight_decay = 0.01;
  c.train.optimizer.max_grad_norm = 0.5;
  c.train.schedule.warmup_steps = 4;
  c.train.micro_batch_tokens = 4096;
  c.train.seed = 99;
  c.train.loss.kind = train::LossKind::kTruncatedIs;
  c.train.loss.advantage = train::AdvantageKind::kGrpo;
  c.train.loss.aggregation = train::Aggregation::kSequenceSum;
  c.train.loss.delta_hi = 0.2;
  c.train.loss.delta_lo = 0.1;
  c.train.loss.clip_eps_hi = 0.28;
  c.train.loss.clip_eps_lo = 0.18;
  c.train.loss.ratio_cap = 8;
  c.loop.groups_per_step = 3;
  c.loop.min_groups = 2;
  c.loop.skip_uniform_groups = true;
  c.loop.no_signal_warn_steps = 25;
  c.loop.gather_timeout = std::chrono::milliseconds(1500);
  c.loop.staleness.max_staleness = 6;
  c.loop.checkpoint_every = 5;
  c.loop.publisher.anchor_every = 7;
  c.loop.publisher.retention.keep_anchors = 2;
  c.hub.verify.enabled = true;
  c.hub.verify.fraction = 0.25;
  c.hub.verify.first_rollouts = 4;
  c.hub.verify.max_wait_ms = 30'000;
  c.hub.verify.train_on_timeout = true;
  c.hub.verify.threads = 2;
  c.hub.verify.max_queue = 9;
  c.hub.verify.remote = true;
  c.hub.verify.job_lease_ms = 7'000;
  c.eval.every_steps = 20;
  c.eval.questions = "/runs/x/data/held_out.jsonl";
  c.eval.limit = 50;
  c.eval.pass_at = 4;
  c.eval.samples = 8;
  c.eval.temperature = 0.9;
  c.eval.success_reward = 0.5;
  c.eval.batch = 12;
  c.eval.seed = 17;
  return c;
}

TEST(RunConfigToml, EveryKeyRoundTrips) {
  const RunConfig c = every_key_set();
  const RunConfig r = parse_run_config(to_toml(c), "rt.toml", "/somewhere/else");
  // The keys the file carries come back as they were set...
  RunConfig expected = c;
  // ...and the reader derives the rest from them.
  expected.hub.ledger_path = "/runs/x/run/ledger.sqlite";
  expected.loop.checkpoint_dir = "/runs/x/run/checkpoint";
  expected.loop.log_path = "/runs/x/run/steps.jsonl";
  expected.hub.max_staleness = 6;
  expected.hub.max_queued_groups = 11;
  expected.train.temperature = static_cast<double>(0.7f);
  expect_same(r, expected);
  // A parsed config is a fixed point: parse(to_toml(r)) == r in every field.
  expect_same(parse_run_config(to_toml(r), "rt2.toml", "/yet/another"), r);
}

TEST(RunConfigToml, DefaultsRoundTripAndDerivedValuesStayDerived) {
  RunConfig c = minimal_run_config();
  c.loop.groups_per_step = 3;
  c.loop.staleness.max_staleness = 4;
  const RunConfig r = parse_run_config(to_toml(c), "rt.toml", "");
  EXPECT_FALSE(r.max_queued_groups.has_value());
  EXPECT_EQ(r.hub.max_queued_groups, 6u) << "3 groups per step x ceil(4 / 2), as when unwritten";
  EXPECT_TRUE(std::isinf(r.train.loss.ratio_cap));
  EXPECT_TRUE(r.task_options.empty());
  expect_same(parse_run_config(to_toml(r), "rt2.toml", ""), r);
}

TEST(RunConfigToml, ValuesTheFileCannotHoldAreRefused) {
  RunConfig c = every_key_set();
  c.hub.lease_ttl_ms = 1500;  // the file holds whole seconds
  EXPECT_THROW(to_toml(c), Error);
  c = every_key_set();
  c.hub.verify.peer_wait_ms = 15'500;  // whole seconds in every section
  EXPECT_THROW(to_toml(c), Error);
  c = every_key_set();
  c.server.port = -1;
  EXPECT_THROW(to_toml(c), Error);
}

}  // namespace
}  // namespace stoa::run
