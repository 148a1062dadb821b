#include "app/pipeline/pipeline_bench.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/fleet/delay_proxy.h"
#include "core/error.h"
#include "core/machine.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "engine/batch_decoder.h"
#include "engine/model_runner.h"
#include "engine/pipeline_backend.h"
#include "model/layer_span.h"
#include "model/presets.h"
#include "roles/pipeline/stage_server.h"
#include "roles/pipeline/tcp_stage_link.h"

namespace stoa::app {
namespace {

using Clock = std::chrono::steady_clock;
using engine::EngineWeights;
using engine::WeightFormat;

struct RunResult {
  int64_t tokens = 0;  // sampled
  double seconds = 0;
  int64_t wire_bytes = 0;  // both ways, every hop
  double cpu_seconds = 0;
};

std::vector<int32_t> prompt_of(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed, 71);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<int32_t>(rng.next() % vocab));
  return out;
}

// One decoder's share: `count` sequences from fresh prompts, each to `new_tokens` tokens.
int64_t decode_share(engine::EngineBackend& backend, const PipelineBenchOptions& o, int64_t first,
                     int64_t count, int64_t vocab) {
  engine::BatchDecoder dec(backend, count, o.prompt_tokens + o.new_tokens + 1);
  for (int64_t s = 0; s < count; ++s) {
    engine::GenerateOptions g;
    g.max_tokens = o.new_tokens;
    g.seed = static_cast<uint64_t>(first + s);
    g.draw = engine::DrawMode::kPositional;
    dec.start(prompt_of(o.prompt_tokens, vocab, static_cast<uint64_t>(first + s)), g);
  }
  int64_t tokens = 0;
  while (dec.active() > 0) tokens += static_cast<int64_t>(dec.step().size());
  return tokens;
}

RunResult run_whole(const ModelWeights& w, const PipelineBenchOptions& o) {
  ThreadPool pool(static_cast<int>(o.threads));
  engine::ModelRunner runner = engine::ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
  RunResult r;
  const double cpu0 = process_cpu_seconds();
  const Clock::time_point t0 = Clock::now();
  r.tokens = decode_share(runner, o, 0, o.sequences, w.config.vocab_size);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu_seconds = process_cpu_seconds() - cpu0;
  return r;
}

RunResult run_pipeline(const ModelWeights& w, const PipelineBenchOptions& o, int64_t k,
                       bool linked) {
  const std::vector<LayerSpan> spans = split_layers(w.config, k);
  std::vector<std::unique_ptr<ThreadPool>> pools;
  std::vector<std::unique_ptr<pipeline::StageServer>> servers;  // last first
  std::vector<std::unique_ptr<fleet::DelayProxy>> proxies;
  // The port the stage before reaches the next one at: the server's, or a proxy's in front.
  auto reach = [&](int port) {
    if (!linked) return port;
    fleet::DelayProxyOptions p;
    p.target_port = port;
    p.one_way_delay = std::chrono::microseconds(static_cast<int64_t>(o.rtt_ms * 500));
    p.rate_bytes_per_s = o.rate_mbit * 1e6 / 8;
    p.max_queued_bytes = 64u << 20;
    proxies.push_back(std::make_unique<fleet::DelayProxy>(p));
    return proxies.back()->port();
  };
  int next_port = 0;
  for (int64_t s = k - 1; s >= 1; --s) {
    pools.push_back(std::make_unique<ThreadPool>(static_cast<int>(o.threads)));
    auto stage = std::make_unique<engine::PipelineStage>(
        std::make_unique<EngineWeights>(
            EngineWeights::from_model(w, WeightFormat::kInt8, spans[static_cast<size_t>(s)])),
        nullptr, pools.back().get());
    pipeline::StageServerOptions so;
    if (next_port != 0) {
      so.next_host = "127.0.0.1";
      so.next_port = next_port;
    }
    servers.push_back(std::make_unique<pipeline::StageServer>(std::move(stage), so));
    next_port = reach(servers.back()->port());
  }
  pools.push_back(std::make_unique<ThreadPool>(static_cast<int>(o.threads)));
  engine::PipelineBackend head(
      std::make_unique<EngineWeights>(EngineWeights::from_model(w, WeightFormat::kInt8, spans[0])),
      std::make_unique<pipeline::TcpStageLink>("127.0.0.1", next_port), pools.back().get());

  const int64_t m = o.micro_batches > 0 ? o.micro_batches : 2 * k;
  STOA_CHECK(m <= o.sequences, ErrorKind::kInvalidArgument, m, " micro-batches need at least as",
             " many sequences, got ", o.sequences);
  RunResult r;
  std::vector<int64_t> tokens(static_cast<size_t>(m), 0);
  std::vector<std::string> errors(static_cast<size_t>(m));
  const double cpu0 = process_cpu_seconds();
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  int64_t first = 0;
  for (int64_t d = 0; d < m; ++d) {
    const int64_t count = o.sequences / m + (d < o.sequences % m ? 1 : 0);
    threads.emplace_back([&, d, first, count] {
      try {
        tokens[static_cast<size_t>(d)] = decode_share(head, o, first, count, w.config.vocab_size);
      } catch (const Error& e) {
        errors[static_cast<size_t>(d)] = e.what();
      }
    });
    first += count;
  }
  for (std::thread& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu_seconds = process_cpu_seconds() - cpu0;
  for (const std::string& e : errors)
    STOA_CHECK(e.empty(), ErrorKind::kNetwork, "pipeline of ", k, " stages: ", e);
  for (int64_t t : tokens) r.tokens += t;
  if (linked) {
    for (const auto& p : proxies) {
      const fleet::DelayProxyCounters c = p->counters();
      r.wire_bytes += static_cast<int64_t>(c.bytes_to_target + c.bytes_to_client);
    }
  } else {
    r.wire_bytes = head.bytes_sent() + head.bytes_received();
    for (const auto& s : servers) r.wire_bytes += s->counters().bytes_down;
  }
  return r;
}

nlohmann::json describe(const RunResult& r, const PipelineBenchOptions& o) {
  return {{"tokens", r.tokens},
          {"seconds", r.seconds},
          {"tokens_per_s", r.tokens / r.seconds},
          {"tokens_per_s_per_sequence", r.tokens / r.seconds / static_cast<double>(o.sequences)},
          {"wire_bytes", r.wire_bytes},
          {"wire_bytes_per_token", r.tokens > 0 ? static_cast<double>(r.wire_bytes) / r.tokens : 0},
          {"cpu_seconds", r.cpu_seconds}};
}

}  // namespace

int run_pipeline_bench(const PipelineBenchOptions& o) {
  STOA_CHECK(o.sequences > 0 && o.prompt_tokens > 0 && o.new_tokens > 0 && o.threads > 0,
             ErrorKind::kInvalidArgument, "sequences, prompt, new tokens and threads must be > 0");
  const ModelConfig config = preset_config(o.preset);
  const ModelWeights w = random_weights(config, 1234, 0.05f);
  const int64_t whole_bytes =
      static_cast<int64_t>(EngineWeights::from_model(w, WeightFormat::kInt8).nbytes());
  nlohmann::json out;
  out["bench"] = "pipeline";
  out["preset"] = o.preset;
  out["layers"] = config.num_layers;
  out["hidden"] = config.hidden_size;
  out["whole_weight_bytes"] = whole_bytes;
  out["sequences"] = o.sequences;
  out["prompt_tokens"] = o.prompt_tokens;
  out["new_tokens"] = o.new_tokens;
  out["rate_mbit"] = o.rate_mbit;
  out["rtt_ms_per_hop"] = o.rtt_ms;
  out["threads_per_stage"] = o.threads;
  out["cpu"] = cpu_model_name();
  out["cores"] = std::thread::hardware_concurrency();
  out["load_before"] = load_averages();
  for (int64_t k : o.stages) {
    nlohmann::json row;
    row["stages"] = k;
    if (k == 1) {
      row["whole"] = describe(run_whole(w, o), o);
      row["max_stage_weight_bytes"] = whole_bytes;
    } else {
      int64_t max_stage = 0;
      for (const LayerSpan& span : split_layers(config, k))
        max_stage = std::max<int64_t>(
            max_stage,
            static_cast<int64_t>(EngineWeights::from_model(w, WeightFormat::kInt8, span).nbytes()));
      row["max_stage_weight_bytes"] = max_stage;
      row["micro_batches"] = o.micro_batches > 0 ? o.micro_batches : 2 * k;
      const RunResult direct = run_pipeline(w, o, k, false);
      const RunResult linked = run_pipeline(w, o, k, true);
      row["direct"] = describe(direct, o);
      row["linked"] = describe(linked, o);
      row["efficiency"] = (linked.tokens / linked.seconds) / (direct.tokens / direct.seconds);
    }
    if (!o.json_out) std::fprintf(stderr, "pipeline bench: %s\n", row.dump().c_str());
    out["runs"].push_back(row);
  }
  out["load_after"] = load_averages();
  std::printf("%s\n", out.dump(o.json_out ? -1 : 2).c_str());
  return 0;
}

}  // namespace stoa::app
