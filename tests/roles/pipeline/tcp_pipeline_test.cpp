// Pipeline stages as servers over TCP (roles/pipeline): the head drives rollouts through K - 1
// StageServers on loopback, and every token and log-prob is a whole machine's; several decoders
// share one head with their micro-batches in flight at once; a killed stage, a stage that stalls
// and a stage that refuses are loud failures, and the stages serve a new head afterwards.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/pipeline_backend.h"
#include "model/layer_span.h"
#include "net/frame_socket.h"
#include "pipeline_script.h"
#include "roles/pipeline/stage_relay.h"
#include "roles/pipeline/stage_server.h"
#include "roles/pipeline/tcp_stage_link.h"
#include "roles/worker/stage_worker.h"

namespace stoa::pipeline {
namespace {

using engine::EngineWeights;
using engine::PipelineBackend;
using engine::PipelineStage;
using engine::WeightFormat;
using engine::testing::Event;
using engine::testing::expect_same_events;
using engine::testing::model_named;
using engine::testing::scripted_run;

std::unique_ptr<EngineWeights> stage_weights(const ModelWeights& w, LayerSpan span) {
  return std::make_unique<EngineWeights>(EngineWeights::from_model(w, WeightFormat::kInt8, span));
}

// Stages 1..K-1 as servers on loopback, the last first so each can name the next's port.
struct Servers {
  std::vector<std::unique_ptr<ThreadPool>> pools;
  std::vector<std::unique_ptr<StageServer>> servers;  // last stage first
  int head_port() const { return servers.back()->port(); }
};

Servers start_servers(const ModelWeights& w, int64_t k, StageServerOptions base = {}) {
  Servers s;
  const std::vector<LayerSpan> spans = split_layers(w.config, k);
  int next_port = 0;
  for (int64_t i = k - 1; i >= 1; --i) {
    s.pools.push_back(std::make_unique<ThreadPool>(1));
    auto stage = std::make_unique<PipelineStage>(stage_weights(w, spans[static_cast<size_t>(i)]),
                                                 nullptr, s.pools.back().get());
    StageServerOptions o = base;
    if (next_port != 0) {
      o.next_host = "127.0.0.1";
      o.next_port = next_port;
    }
    s.servers.push_back(std::make_unique<StageServer>(std::move(stage), o));
    next_port = s.servers.back()->port();
  }
  return s;
}

std::unique_ptr<PipelineBackend> head_of(const ModelWeights& w, int64_t k, int port,
                                         ThreadPool* pool, TcpStageLinkOptions link = {}) {
  return std::make_unique<PipelineBackend>(stage_weights(w, split_layers(w.config, k)[0]),
                                           std::make_unique<TcpStageLink>("127.0.0.1", port, link),
                                           pool);
}

TEST(PipelineTcp, TwoAndFourStagesOverTcpMatchOneMachine) {
  for (const char* name : {"qwen3-6", "tiny-lfm2"}) {
    SCOPED_TRACE(name);
    const ModelWeights w = model_named(name);
    ThreadPool pool(1);
    engine::ModelRunner whole = engine::ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
    const std::vector<Event> want = scripted_run(whole, w.config.vocab_size);
    for (int64_t k : {2, 4}) {
      SCOPED_TRACE(k);
      Servers servers = start_servers(w, k);
      auto head = head_of(w, k, servers.head_port(), &pool);
      expect_same_events(want, scripted_run(*head, w.config.vocab_size));
      EXPECT_GT(servers.servers.back()->counters().frames, 10);
    }
  }
}

TEST(PipelineTcp, SeveralDecodersInFlightOnOneHeadMatchTheirSoloRuns) {
  const ModelWeights w = model_named("tiny-lfm2");
  ThreadPool pool(1);
  engine::ModelRunner whole = engine::ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
  constexpr int kDecoders = 3;
  std::vector<std::vector<Event>> want;
  for (int d = 0; d < kDecoders; ++d)
    want.push_back(scripted_run(whole, w.config.vocab_size, static_cast<uint64_t>(d)));
  Servers servers = start_servers(w, 3);
  auto head = head_of(w, 3, servers.head_port(), &pool);
  std::vector<std::vector<Event>> got(kDecoders);
  std::vector<std::thread> threads;
  for (int d = 0; d < kDecoders; ++d)
    threads.emplace_back([&, d] {
      got[static_cast<size_t>(d)] =
          scripted_run(*head, w.config.vocab_size, static_cast<uint64_t>(d));
    });
  for (std::thread& t : threads) t.join();
  for (int d = 0; d < kDecoders; ++d) {
    SCOPED_TRACE(d);
    expect_same_events(want[static_cast<size_t>(d)], got[static_cast<size_t>(d)]);
  }
}

TEST(PipelineTcp, AKilledStageBreaksThePipelineAndTheStagesServeTheNextHead) {
  const ModelWeights w = model_named("qwen3-6");
  ThreadPool pool(1);
  Servers servers = start_servers(w, 3);
  {
    auto head = head_of(w, 3, servers.head_port(), &pool);
    engine::BatchDecoder dec(*head, 2, 64);
    engine::GenerateOptions o;
    o.max_tokens = 30;
    dec.start(engine::testing::random_tokens(5, w.config.vocab_size, 9), o);
    (void)dec.step();
    servers.servers.front()->drop_session();  // the last stage's connection dies
    try {
      for (int i = 0; i < 30; ++i) (void)dec.step();
      FAIL() << "steps through a dead stage succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kNetwork) << e.what();
    }
    EXPECT_TRUE(head->broken());
    // The stage before the dead one saw its next stage fail it; the dead one has no next.
    EXPECT_EQ(servers.servers[1]->counters().next_failures, 1);
    EXPECT_EQ(servers.servers[0]->counters().next_failures, 0);
  }  // the decoder's sequences go quietly (the pipeline is broken), then the head

  // The stages dropped the old sequences and serve a new head from scratch.
  auto again = head_of(w, 3, servers.head_port(), &pool);
  engine::ModelRunner whole = engine::ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
  expect_same_events(scripted_run(whole, w.config.vocab_size),
                     scripted_run(*again, w.config.vocab_size));
}

TEST(PipelineTcp, AStageThatStallsIsCaughtByTheDeadline) {
  const ModelWeights w = model_named("qwen3-6");
  // A "stage" that takes the connection and never answers.
  net::FrameListener silent("127.0.0.1", 0);
  std::thread taker([&] {
    try {
      net::FrameSocket s = silent.accept(std::chrono::seconds(10));
      std::this_thread::sleep_for(std::chrono::seconds(3));
    } catch (const Error&) {
    }
  });
  ThreadPool pool(1);
  TcpStageLinkOptions fast;
  fast.answer_deadline = std::chrono::milliseconds(400);
  try {
    auto head = head_of(w, 2, silent.port(), &pool, fast);
    (void)head->new_state(16);
    FAIL() << "a silent stage answered";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNetwork);
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
  silent.close();
  taker.join();
}

// The stage before a stalled one gives up first (its deadline is the shorter: stage_worker.cpp)
// and counts the failure, which a member reports to the hub (pipeline_groups.h); a head that
// ends its session counts against nobody.
TEST(PipelineTcp, TheStageBeforeAStalledOneCountsItsNextFailure) {
  const ModelWeights w = model_named("qwen3-6");
  net::FrameListener silent("127.0.0.1", 0);  // stage 2: takes the connection, never answers
  std::thread taker([&] {
    try {
      net::FrameSocket s = silent.accept(std::chrono::seconds(10));
      std::this_thread::sleep_for(std::chrono::seconds(3));
    } catch (const Error&) {
    }
  });
  ThreadPool pool(1);
  StageServerOptions o;
  o.next_host = "127.0.0.1";
  o.next_port = silent.port();
  o.answer_deadline = std::chrono::milliseconds(300);
  StageServer stage1(std::make_unique<PipelineStage>(stage_weights(w, split_layers(w.config, 3)[1]),
                                                     nullptr, &pool),
                     o);
  TcpStageLinkOptions patient;
  patient.answer_deadline = std::chrono::seconds(5);
  const auto started = std::chrono::steady_clock::now();
  try {
    auto head = head_of(w, 3, stage1.port(), &pool, patient);
    (void)head->new_state(16);
    FAIL() << "a pass through a silent stage was answered";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNetwork) << e.what();
    EXPECT_EQ(worker::stage_named_in(e.what(), w.config, 3), -1) << e.what();  // names nobody
  }
  // The head learnt of it from stage 1 ending the session, not from its own deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(4));
  EXPECT_EQ(stage1.counters().next_failures, 1);
  silent.close();
  taker.join();

  Servers servers = start_servers(w, 3);
  {
    auto head = head_of(w, 3, servers.head_port(), &pool);
    (void)head->new_state(16);
  }  // the head goes: its session ends from upstream
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(servers.servers[1]->counters().next_failures, 0);
  EXPECT_EQ(servers.servers[1]->counters().sessions, 1);
}

// A stage that refuses breaks the pipeline with its span in the reason: the head tells the hub
// which stage it was (stage_worker.h).
TEST(PipelineTcp, ARefusalNamesTheStageThatRefused) {
  const ModelWeights w = model_named("qwen3-6");
  const std::vector<LayerSpan> spans = split_layers(w.config, 3);
  ThreadPool pool(1);
  StageServer last(std::make_unique<PipelineStage>(stage_weights(w, spans[2]), nullptr, &pool,
                                                   /*max_sequences=*/1),
                   {});
  StageServerOptions o;
  o.next_host = "127.0.0.1";
  o.next_port = last.port();
  StageServer middle(std::make_unique<PipelineStage>(stage_weights(w, spans[1]), nullptr, &pool),
                     o);
  auto head = head_of(w, 3, middle.port(), &pool);
  auto first = head->new_state(16);
  try {
    (void)head->new_state(16);  // the last stage holds one sequence at most: it refuses
    FAIL() << "a stage past its bound took a sequence";
  } catch (const Error& e) {
    EXPECT_EQ(worker::stage_named_in(e.what(), w.config, 3), 2) << e.what();
    EXPECT_EQ(worker::stage_named_in(e.what(), w.config, 2), -1) << e.what();  // other spans
  }
  EXPECT_TRUE(head->broken());
  EXPECT_EQ(middle.counters().next_failures, 0);  // an answer, not a failure of the link
}

TEST(PipelineTcp, AStageThatRefusesAFrameSaysWhy) {
  const ModelWeights w = model_named("qwen3-6");
  Servers servers = start_servers(w, 2);
  net::FrameSocket s =
      net::FrameSocket::connect("127.0.0.1", servers.head_port(), std::chrono::seconds(5));
  const std::vector<uint8_t> junk = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  s.send(junk, std::chrono::seconds(5));
  const std::vector<uint8_t> answer = s.receive(std::chrono::seconds(5), 1 << 20);
  ASSERT_EQ(engine::stage_frame_kind(answer), engine::StageFrameKind::kError);
  EXPECT_NE(engine::decode_stage_error(answer).find("magic"), std::string::npos);
  // A frame announced past the bound ends the session instead of allocating it.
  StageServerOptions tight;
  tight.max_frame_bytes = 1024;
  Servers bounded = start_servers(w, 2, tight);
  net::FrameSocket b =
      net::FrameSocket::connect("127.0.0.1", bounded.head_port(), std::chrono::seconds(5));
  b.send(std::vector<uint8_t>(4096, 0), std::chrono::seconds(5));
  EXPECT_THROW((void)b.receive(std::chrono::seconds(5), 1 << 20), Error);
}

// Stages behind NAT: nobody listens but the relay; every stage and the head dial out to it and
// are paired by key. The rollouts are still a whole machine's.
TEST(PipelineTcp, StagesBehindNatTalkThroughARelay) {
  const ModelWeights w = model_named("tiny-lfm2");
  StageRelay relay({});
  const std::vector<LayerSpan> spans = split_layers(w.config, 3);
  ThreadPool pool(1);
  std::vector<std::unique_ptr<StageServer>> servers;
  for (int64_t i = 2; i >= 1; --i) {
    StageServerOptions o;
    o.relay_host = "127.0.0.1";
    o.relay_port = relay.port();
    o.relay_key = "group-7/stage-" + std::to_string(i);
    if (i == 1) {
      o.next_host = "127.0.0.1";
      o.next_port = relay.port();
      o.next_relay_key = "group-7/stage-2";
    }
    servers.push_back(std::make_unique<StageServer>(
        std::make_unique<PipelineStage>(stage_weights(w, spans[static_cast<size_t>(i)]), nullptr,
                                        &pool),
        o));
    EXPECT_EQ(servers.back()->port(), 0);  // listening nowhere
  }
  TcpStageLinkOptions via;
  via.relay_key = "group-7/stage-1";
  auto head = std::make_unique<PipelineBackend>(
      stage_weights(w, spans[0]), std::make_unique<TcpStageLink>("127.0.0.1", relay.port(), via),
      &pool);
  engine::ModelRunner whole = engine::ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
  expect_same_events(scripted_run(whole, w.config.vocab_size),
                     scripted_run(*head, w.config.vocab_size));
  const StageRelayCounters c = relay.counters();
  EXPECT_EQ(c.pairs, 2);
  EXPECT_GT(c.bytes, 0);
  // A connection that does not join properly is refused and counted.
  net::FrameSocket junk =
      net::FrameSocket::connect("127.0.0.1", relay.port(), std::chrono::seconds(5));
  junk.send(std::vector<uint8_t>{'H', 'E', 'L', 'L', 'O', 0}, std::chrono::seconds(5));
  EXPECT_THROW((void)junk.receive(std::chrono::seconds(5), 64), Error);
  EXPECT_EQ(relay.counters().refused, 1);
  head.reset();
  for (auto& server : servers) server->stop();
}

}  // namespace
}  // namespace stoa::pipeline
