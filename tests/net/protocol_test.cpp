// Codecs of the wire protocol: every message round-trips, and every decoder turns malformed,
// mistyped or structurally wrong JSON into stoa::Error(kInvalidArgument) naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include "core/error.h"
#include "net/protocol.h"
#include "net/task_protocol.h"
#include "support/error_of.h"

namespace stoa::net {
namespace {

using nlohmann::json;

RolloutSubmission sample_rollout() {
  RolloutSubmission m;
  m.id = random_uuid();
  m.worker_id = "w-1";
  m.lease_id = "l-1";
  m.group_id = "g-1";
  m.prompt_id = "q-1";
  m.tokens = {5, 6, 7, 8};
  m.mask = {0, 0, 1, 1};
  m.logprobs = {0, 0, -0.25f, -1.5f};
  m.versions = {0, 0, 3, 4};
  m.topk = 1;
  m.topk_ids = {5, 6, 7, 8};
  m.topk_logprobs = {0, 0, -0.25f, -1.5f};
  m.answer = "Borvex";
  m.turns = 2;
  m.timings.generate_ms = 12.5;
  m.timings.started_unix_ms = 100;
  m.timings.finished_unix_ms = 200;
  return m;
}

// The words of the kInvalidArgument error `fn` throws.
std::string error_of(const std::function<void()>& fn) {
  const Error e = test::error_of(fn);
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
  return e.what();
}

TEST(Protocol, RolloutRoundTrip) {
  auto m = sample_rollout();
  auto back = rollout_submission_from_json(json::parse(to_json(m).dump()));
  EXPECT_EQ(back.id, m.id);
  EXPECT_EQ(back.tokens, m.tokens);
  EXPECT_EQ(back.mask, m.mask);
  EXPECT_EQ(back.logprobs, m.logprobs);
  EXPECT_EQ(back.versions, m.versions);
  EXPECT_EQ(back.topk_ids, m.topk_ids);
  EXPECT_EQ(back.answer, m.answer);
  EXPECT_EQ(back.timings.generate_ms, 12.5);
}

// The replay fields (docs/design/verification.md): a lease's seeds (one per sample, 64-bit), a
// rollout's seed, kernel target and prompt version — optional, absent from older peers.
TEST(Protocol, ReplayFieldsRoundTrip) {
  auto m = sample_rollout();
  auto plain = rollout_submission_from_json(json::parse(to_json(m).dump()));
  EXPECT_FALSE(plain.seed.has_value());
  EXPECT_FALSE(plain.prompt_version.has_value());
  EXPECT_TRUE(plain.kernel_target.empty());
  m.seed = 0xfedcba9876543210ull;
  m.kernel_target = "AVX2";
  m.prompt_version = 3;
  auto back = rollout_submission_from_json(json::parse(to_json(m).dump()));
  EXPECT_EQ(back.seed, m.seed);
  EXPECT_EQ(back.kernel_target, "AVX2");
  EXPECT_EQ(back.prompt_version, 3u);

  // The engine arithmetic: this build's by default, carried through, and absent read as the
  // arithmetic of a build before the field (1); outside 1..kMaxArithmetic refused.
  EXPECT_EQ(back.arithmetic, kArithmeticOfThisBuild);
  json old = to_json(m);
  old.erase("arithmetic");
  EXPECT_EQ(rollout_submission_from_json(old).arithmetic, kArithmeticBeforeTheField);
  JoinRequest join;
  EXPECT_EQ(join_request_from_json(to_json(join)).arithmetic, kArithmeticOfThisBuild);
  json old_join = to_json(join);
  old_join.erase("arithmetic");
  EXPECT_EQ(join_request_from_json(old_join).arithmetic, kArithmeticBeforeTheField);
  for (int bad : {0, -2, kMaxArithmetic + 1}) {
    json j = to_json(m);
    j["arithmetic"] = bad;
    EXPECT_NE(error_of([&] { rollout_submission_from_json(j); }).find("arithmetic"),
              std::string::npos);
  }

  Lease l;
  l.lease_id = "l";
  l.group_id = "g";
  l.prompt_id = "p";
  l.question = "Q?";
  l.prompt_tokens = {1};
  l.samples = 2;
  l.deadline_unix_ms = 1;
  l.seeds = {0xffffffffffffffffull, 7};
  EXPECT_EQ(lease_from_json(json::parse(to_json(l).dump())).seeds, l.seeds);
  l.seeds = {7};
  EXPECT_NE(error_of([&] { lease_from_json(to_json(l)); }).find("seeds"), std::string::npos);
}

TEST(Protocol, OtherMessagesRoundTrip) {
  Lease l;
  l.lease_id = "l";
  l.group_id = "g";
  l.prompt_id = "p";
  l.question = "Q?";
  l.prompt_tokens = {1, 2, 3};
  l.samples = 4;
  l.sampling.temperature = 0.7f;
  l.deadline_unix_ms = 123;
  LeaseResponse lr{l, 0};
  auto back = lease_response_from_json(json::parse(to_json(lr).dump()));
  ASSERT_TRUE(back.lease.has_value());
  EXPECT_EQ(back.lease->prompt_tokens, l.prompt_tokens);
  EXPECT_FLOAT_EQ(back.lease->sampling.temperature, 0.7f);
  EXPECT_FALSE(lease_response_from_json(to_json(LeaseResponse{std::nullopt, 500})).lease);

  VersionInfo v;
  v.version = 7;
  v.state_hash = std::string(32, 'a');
  v.blobs.push_back({"anchor", 5, 5, std::string(32, 'b'), 100});
  v.blobs.push_back({"patch", 5, 7, std::string(32, 'c'), 10});
  auto vb = version_info_from_json(json::parse(to_json(v).dump()));
  EXPECT_EQ(vb.version, 7u);
  ASSERT_EQ(vb.blobs.size(), 2u);
  EXPECT_EQ(vb.blobs[1].from_version, 5u);
  EXPECT_FALSE(version_info_from_json(to_json(VersionInfo{})).version.has_value());

  Heartbeat h;
  h.worker_id = "w";
  h.version = 3;
  h.leases = {"a", "b"};
  h.tokens_per_s = 12;
  auto hb = heartbeat_from_json(to_json(h));
  EXPECT_EQ(hb.leases, h.leases);
  EXPECT_EQ(hb.version, 3u);
  EXPECT_FALSE(hb.swarm);
  h.swarm = SwarmServing{1 << 20, 5, 6, 3, 2};
  hb = heartbeat_from_json(json::parse(to_json(h).dump()));
  ASSERT_TRUE(hb.swarm);
  EXPECT_EQ(hb.swarm->uploaded_bytes, 1u << 20);
  EXPECT_EQ(hb.swarm->serving_peers, 3);
  json bad = to_json(h);
  bad["swarm"]["serving_peers"] = -1;
  EXPECT_THROW(heartbeat_from_json(bad), Error);
  bad["swarm"] = "many";
  EXPECT_THROW(heartbeat_from_json(bad), Error);

  JoinResponse j;
  j.worker_id = "w";
  j.session_token = "t";
  j.vocab_size = 5;
  j.max_tokens = 9;
  EXPECT_EQ(join_response_from_json(to_json(j)).max_tokens, 9);
  RolloutResponse rr;
  rr.status = IntakeStatus::kRejected;
  rr.reason = "stale";
  auto rj = to_json(rr);
  EXPECT_TRUE(rj.contains("error"));
  EXPECT_EQ(rollout_response_from_json(rj).reason, "stale");
}

// What a worker needs of the run (task, its options and stop strings, the model's files) rides on
// the join reply, bounded: a hostile hub can neither grow a worker's memory nor name a path.
TEST(Protocol, JoinReplyCarriesTheRunAndIsBounded) {
  JoinResponse j;
  j.worker_id = "w";
  j.session_token = "t";
  j.vocab_size = 5;
  j.max_tokens = 9;
  j.task = "http";
  j.task_options = {{"topk", "3"}};
  j.stop_strings = {"</calc>", "</answer>"};
  j.run_files = {{"config.json", std::string(32, 'a'), 120},
                 {"tokenizer.json", std::string(32, 'b'), 9}};
  const JoinResponse back = join_response_from_json(json::parse(to_json(j).dump()));
  EXPECT_EQ(back.task_options, j.task_options);
  EXPECT_EQ(back.stop_strings, j.stop_strings);
  ASSERT_EQ(back.run_files.size(), 2u);
  EXPECT_EQ(back.run_files[1].name, "tokenizer.json");
  EXPECT_EQ(back.run_files[0].bytes, 120u);
  auto refused = [&](const std::function<void(json&)>& spoil) {
    json bad = to_json(j);
    spoil(bad);
    EXPECT_THROW(join_response_from_json(bad), Error) << bad.dump();
  };
  refused([](json& b) { b["run_files"][0]["name"] = "../../.bashrc"; });
  refused([](json& b) { b["run_files"][0]["name"] = "model.safetensors"; });
  refused([](json& b) { b["run_files"][0]["hash"] = "not-hex"; });
  refused([](json& b) { b["run_files"][0]["bytes"] = uint64_t{1} << 40; });
  refused([](json& b) { b["task_options"]["k"] = 3; });
  refused([](json& b) { b["task_options"]["k"] = std::string(5000, 'x'); });
  refused([](json& b) {
    for (int i = 0; i < 70; ++i) b["task_options"]["k" + std::to_string(i)] = "v";
  });
  refused([](json& b) { b["stop_strings"] = json::array({""}); });
  refused([](json& b) { b["stop_strings"] = json::array({std::string(65, 's')}); });
}

TEST(Protocol, TaskThroughTheHubMessages) {
  const TaskStepRequest req{"w", "p", "<calc>1+1</calc>", false};
  const TaskStepRequest rb = task_step_request_from_json(json::parse(to_json(req).dump()));
  EXPECT_EQ(rb.action, req.action);
  EXPECT_FALSE(rb.tools_allowed);
  TaskStepReply reply;
  reply.kind = "tool";
  reply.tool = "calc";
  reply.observation_head = "<result>";
  reply.observation_body = "2";
  reply.observation_tail = "</result>";
  const TaskStepReply back = task_step_reply_from_json(json::parse(to_json(reply).dump()));
  EXPECT_EQ(back.observation_body, "2");
  EXPECT_EQ(back.observation_tail, "</result>");
  EXPECT_THROW(task_step_request_from_json(json{{"worker_id", "w"},
                                                {"prompt_id", "p"},
                                                {"action", std::string(300000, 'a')},
                                                {"tools_allowed", true}}),
               Error);
  EXPECT_THROW(task_step_request_from_json(json{{"worker_id", "w"}, {"prompt_id", "p"}}), Error);
  EXPECT_THROW(task_step_reply_from_json(json{{"kind", "dance"}, {"done", false}}), Error);
  EXPECT_THROW(task_step_reply_from_json(json{{"kind", "tool"}, {"done", "no"}}), Error);
  EXPECT_EQ(task_prompt_reply_from_json(json{{"prompt", "Q"}}), "Q");
  EXPECT_THROW(task_prompt_reply_from_json(json{{"prompt", 1}}), Error);
}

TEST(Protocol, StructuralErrorsNameTheField) {
  auto base = to_json(sample_rollout());
  auto with = [&](const char* field, json v) {
    json j = base;
    j[field] = v;
    return error_of([&] { rollout_submission_from_json(j); });
  };
  EXPECT_NE(with("id", "not-a-uuid").find("UUID"), std::string::npos);
  EXPECT_NE(with("tokens", "x").find("tokens"), std::string::npos);
  EXPECT_NE(with("mask", json::array({0, 0, 1})).find("mask"), std::string::npos);
  EXPECT_NE(with("mask", json::array({0, 0, 2, 1})).find("mask[2]"), std::string::npos);
  EXPECT_NE(with("tokens", json::array()).find("no tokens"), std::string::npos);
  EXPECT_NE(with("topk", 3).find("top-K"), std::string::npos);
  EXPECT_NE(with("topk", -1).find("topk"), std::string::npos);
  EXPECT_NE(with("versions", json::array({0, 0, -1, 1})).find("versions"), std::string::npos);
  EXPECT_NE(with("logprobs", json::array({0, 0, "a", 1})).find("logprobs"), std::string::npos);
  json missing = base;
  missing.erase("lease_id");
  EXPECT_NE(error_of([&] { rollout_submission_from_json(missing); }).find("lease_id"),
            std::string::npos);
  // JSON has no NaN: a null log-prob decodes to NaN for the intake to reject with a reason.
  json nulled = base;
  nulled["logprobs"][2] = nullptr;
  EXPECT_TRUE(std::isnan(rollout_submission_from_json(nulled).logprobs[2]));
  EXPECT_NE(error_of([&] {
              join_request_from_json(json{{"protocol", 2}});
            }).find("protocol"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_body("{", "join"); }).find("malformed"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_body("[]", "join"); }).find("array"), std::string::npos);
  EXPECT_NE(error_of([&] {
              blob_ref_from_json(json{{"kind", "x"}});
            }).find("kind"),
            std::string::npos);
}

// Field by field, what a decoded rollout promises the intake (NaN log-probs compare by bits).
void expect_same_rollout(const RolloutSubmission& a, const RolloutSubmission& b, int trial) {
  EXPECT_EQ(to_json(a).dump(), to_json(b).dump()) << "trial " << trial;
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.mask, b.mask);
  EXPECT_EQ(a.versions, b.versions);
  EXPECT_EQ(a.topk, b.topk);
  EXPECT_EQ(a.topk_ids, b.topk_ids);
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  EXPECT_EQ(std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * 4), 0);
}

TEST(Protocol, FuzzedJsonIsRefusedOrDecodesToAValidRoundTrippingMessage) {
  // Random mutations of a valid message. Every outcome is counted: malformed JSON and refused
  // fields are stoa::Error(kInvalidArgument); a message that decodes holds the decoder's
  // invariants and round-trips unchanged through to_json.
  std::mt19937 rng(7);
  std::string good = to_json(sample_rollout()).dump();
  int malformed = 0, refused = 0, decoded = 0, other_refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s[at] = static_cast<char>(rng() % 256);
          break;
        case 1:
          s.erase(at, 1 + rng() % 8);
          break;
        default:
          // (iterator insert: GCC 12 misreports the size_t overload under -Wrestrict)
          s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), "{}[]\",:0-e9n"[rng() % 12]);
      }
      if (s.empty()) s.push_back('{');
    }
    json j;
    try {
      j = parse_body(s, "fuzz");
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      ++malformed;
      continue;
    }
    try {
      const RolloutSubmission m = rollout_submission_from_json(j);
      ++decoded;
      EXPECT_TRUE(looks_like_uuid(m.id)) << "trial " << i << ": " << m.id;
      ASSERT_FALSE(m.tokens.empty()) << "trial " << i;
      const size_t n = m.tokens.size();
      EXPECT_EQ(m.mask.size(), n) << "trial " << i;
      EXPECT_EQ(m.logprobs.size(), n) << "trial " << i;
      EXPECT_EQ(m.versions.size(), n) << "trial " << i;
      for (uint8_t bit : m.mask) EXPECT_LE(bit, 1) << "trial " << i;
      EXPECT_GE(m.topk, 0) << "trial " << i;
      EXPECT_EQ(m.topk_ids.size(), n * static_cast<size_t>(m.topk)) << "trial " << i;
      EXPECT_EQ(m.topk_logprobs.size(), n * static_cast<size_t>(m.topk)) << "trial " << i;
      expect_same_rollout(rollout_submission_from_json(json::parse(to_json(m).dump())), m, i);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      ++refused;
    }
    // The other decoders, fed a rollout-shaped object, must refuse it the same clean way.
    for (const auto& decode : std::vector<std::function<void(const json&)>>{
             [](const json& x) { heartbeat_from_json(x); },
             [](const json& x) { lease_response_from_json(x); },
             [](const json& x) { version_info_from_json(x); }}) {
      try {
        decode(j);
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
        ++other_refused;
      }
    }
  }
  std::printf("[protocol fuzz] 3000 mutations: %d malformed JSON, %d refused, %d decoded\n",
              malformed, refused, decoded);
  EXPECT_EQ(malformed + refused + decoded, 3000);
  EXPECT_GT(malformed, 1000);  // most edits break the syntax
  EXPECT_GT(refused, 100);     // many break a field the decoder checks
  EXPECT_GT(decoded, 10);      // some land inside a string or keep every field valid
  EXPECT_GT(other_refused, 0);
}

TEST(Protocol, UuidsAndTokens) {
  auto u = random_uuid();
  EXPECT_TRUE(looks_like_uuid(u)) << u;
  EXPECT_EQ(u[14], '4');
  EXPECT_NE(random_uuid(), u);
  EXPECT_FALSE(looks_like_uuid("0000"));
  EXPECT_FALSE(looks_like_uuid(std::string(36, 'z')));
  EXPECT_EQ(random_token().size(), 32u);
}

}  // namespace
}  // namespace stoa::net
