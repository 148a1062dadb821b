#include "app/pipeline/pipeline_bench.h"

#include <unistd.h>

#include <bit>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "core/machine.h"
#include "core/process.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "engine/batch_decoder.h"
#include "engine/model_runner.h"
#include "engine/pipeline_backend.h"
#include "model/layer_span.h"
#include "model/presets.h"
#include "net/link_proxy.h"
#include "roles/pipeline/stage_relay.h"
#include "roles/pipeline/stage_server.h"
#include "roles/pipeline/tcp_stage_link.h"

namespace stoa::app {
namespace {

constexpr uint64_t kWeightSeed = 1234;  // the bench's weights and its stage processes' alike
constexpr float kWeightStd = 0.05f;

using Clock = std::chrono::steady_clock;
using engine::EngineWeights;
using engine::WeightFormat;

struct RunResult {
  int64_t tokens = 0;  // sampled
  double seconds = 0;
  int64_t wire_bytes = 0;               // both ways, every hop
  double cpu_seconds = 0;               // this process's (the head's, and the stages' when threads)
  std::vector<int64_t> stage_peak_rss;  // VmHWM of each stage process, last stage first
  // Per sequence, each sampled token and its log-prob's bits (token << 32 | bits): a pipeline's
  // must be the whole model's.
  std::vector<std::vector<uint64_t>> transcripts;
};

// A `stoa stage` child serving stage `index` of `k`, and the port it printed.
struct StageChild {
  Process process;
  int port = 0;
};

StageChild start_stage_process(const PipelineBenchOptions& o, int64_t k, int64_t index,
                               int next_port, const std::filesystem::path& dir) {
  const std::string name = "stage-" + std::to_string(index);
  const std::filesystem::path log = dir / (name + ".out");
  std::vector<std::string> argv = {"/proc/self/exe", "stage",
                                   "--preset",       o.preset,
                                   "--seed",         std::to_string(kWeightSeed),
                                   "--stages",       std::to_string(k),
                                   "--index",        std::to_string(index),
                                   "--threads",      std::to_string(o.threads)};
  if (next_port != 0) {
    argv.push_back("--next");
    argv.push_back("127.0.0.1:" + std::to_string(next_port));
  }
  ProcessOptions po;
  po.out = OutputTarget::file(log.string(), true);
  po.err = OutputTarget::file((dir / (name + ".err")).string(), true);
  StageChild child{Process::start(argv, po), 0};
  // The child prints one JSON line once it serves (loading may take a while on a big model).
  const Clock::time_point until = Clock::now() + std::chrono::minutes(5);
  while (Clock::now() < until) {
    std::ifstream in(log);
    std::string line;
    if (std::getline(in, line) && !line.empty()) {
      child.port = nlohmann::json::parse(line).at("port").get<int>();
      return child;
    }
    STOA_CHECK(!child.process.wait_for(std::chrono::milliseconds(50)), ErrorKind::kInternal,
               "stoa stage ", index, " of ", k, " exited before serving (see ",
               (dir / (name + ".err")).string(), ")");
  }
  fail(ErrorKind::kInternal, "stoa stage ", index, " of ", k, " did not serve within 5 minutes");
}

std::vector<int32_t> prompt_of(int64_t n, int64_t vocab, uint64_t seed) {
  Rng rng(seed, 71);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<int32_t>(rng.next() % vocab));
  return out;
}

// One decoder's share: sequences first .. first + count - 1 from fresh prompts, each to
// `new_tokens` tokens, recorded into their entries of `transcripts` (disjoint per decoder).
int64_t decode_share(engine::EngineBackend& backend, const PipelineBenchOptions& o, int64_t first,
                     int64_t count, int64_t vocab,
                     std::vector<std::vector<uint64_t>>& transcripts) {
  engine::BatchDecoder dec(backend, count, o.prompt_tokens + o.new_tokens + 1);
  std::vector<int64_t> sequence_of(static_cast<size_t>(count));
  for (int64_t s = 0; s < count; ++s) {
    engine::GenerateOptions g;
    g.max_tokens = o.new_tokens;
    g.seed = static_cast<uint64_t>(first + s);
    g.draw = engine::DrawMode::kPositional;
    const int64_t slot =
        dec.start(prompt_of(o.prompt_tokens, vocab, static_cast<uint64_t>(first + s)), g);
    sequence_of[static_cast<size_t>(slot)] = first + s;
  }
  int64_t tokens = 0;
  while (dec.active() > 0) {
    for (const engine::StepEvent& e : dec.step()) {
      ++tokens;
      transcripts[static_cast<size_t>(sequence_of[static_cast<size_t>(e.slot)])].push_back(
          static_cast<uint64_t>(static_cast<uint32_t>(e.sampled.token)) << 32 |
          std::bit_cast<uint32_t>(e.sampled.logprob));
    }
  }
  return tokens;
}

RunResult run_whole(const ModelWeights& w, const PipelineBenchOptions& o) {
  ThreadPool pool(static_cast<int>(o.threads));
  engine::ModelRunner runner = engine::ModelRunner::from_model(w, WeightFormat::kInt8, &pool);
  RunResult r;
  const double cpu0 = process_cpu_seconds();
  const Clock::time_point t0 = Clock::now();
  r.transcripts.resize(static_cast<size_t>(o.sequences));
  r.tokens = decode_share(runner, o, 0, o.sequences, w.config.vocab_size, r.transcripts);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu_seconds = process_cpu_seconds() - cpu0;
  return r;
}

RunResult run_pipeline(const ModelWeights& w, const PipelineBenchOptions& o, int64_t k,
                       bool linked) {
  const std::vector<LayerSpan> spans = split_layers(w.config, k);
  std::vector<std::unique_ptr<ThreadPool>> pools;
  std::vector<std::unique_ptr<pipeline::StageServer>> servers;  // last first
  std::vector<StageChild> children;                             // or these, last first
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("stoa-pipeline-bench-" + std::to_string(::getpid()));
  if (o.processes) std::filesystem::create_directories(dir);
  std::vector<std::unique_ptr<net::LinkProxy>> proxies;
  // The port the stage before reaches the next one at: the server's, or a proxy's in front.
  auto reach = [&](int port) {
    if (!linked) return port;
    net::LinkProxyOptions p;
    p.target_port = port;
    p.one_way_delay = std::chrono::microseconds(static_cast<int64_t>(o.rtt_ms * 500));
    p.rate_bytes_per_s = o.rate_mbit * 1e6 / 8;
    p.max_queued_bytes = 64u << 20;
    proxies.push_back(std::make_unique<net::LinkProxy>(p));
    return proxies.back()->port();
  };
  // Behind NAT (--relay): nobody listens but a relay; each stage dials it through its own
  // link to serve its key, and the stage before dials it through its link to reach that key.
  std::unique_ptr<pipeline::StageRelay> relay;
  if (o.relay) relay = std::make_unique<pipeline::StageRelay>(pipeline::StageRelayOptions{});
  auto key_of = [](int64_t s) { return "stage-" + std::to_string(s); };
  int next_port = 0;
  for (int64_t s = k - 1; s >= 1; --s) {
    if (o.processes) {
      children.push_back(start_stage_process(o, k, s, next_port, dir));
      next_port = reach(children.back().port);
      continue;
    }
    pools.push_back(std::make_unique<ThreadPool>(static_cast<int>(o.threads)));
    auto stage = std::make_unique<engine::PipelineStage>(
        std::make_unique<EngineWeights>(
            EngineWeights::from_model(w, WeightFormat::kInt8, spans[static_cast<size_t>(s)])),
        nullptr, pools.back().get());
    pipeline::StageServerOptions so;
    if (relay) {
      so.relay_host = "127.0.0.1";
      so.relay_port = reach(relay->port());
      so.relay_key = key_of(s);
      if (s < k - 1) {
        so.next_host = "127.0.0.1";
        so.next_port = reach(relay->port());
        so.next_relay_key = key_of(s + 1);
      }
    } else if (next_port != 0) {
      so.next_host = "127.0.0.1";
      so.next_port = next_port;
    }
    servers.push_back(std::make_unique<pipeline::StageServer>(std::move(stage), so));
    if (!relay) next_port = reach(servers.back()->port());
  }
  pipeline::TcpStageLinkOptions head_link;
  if (relay) {
    head_link.relay_key = key_of(1);
    next_port = reach(relay->port());
  }
  pools.push_back(std::make_unique<ThreadPool>(static_cast<int>(o.threads)));
  engine::PipelineBackend head(
      std::make_unique<EngineWeights>(EngineWeights::from_model(w, WeightFormat::kInt8, spans[0])),
      std::make_unique<pipeline::TcpStageLink>("127.0.0.1", next_port, head_link),
      pools.back().get());

  const int64_t m = o.micro_batches > 0 ? o.micro_batches : 2 * k;
  STOA_CHECK(m <= o.sequences, ErrorKind::kInvalidArgument, m, " micro-batches need at least as",
             " many sequences, got ", o.sequences);
  RunResult r;
  std::vector<int64_t> tokens(static_cast<size_t>(m), 0);
  r.transcripts.resize(static_cast<size_t>(o.sequences));
  std::vector<std::string> errors(static_cast<size_t>(m));
  const double cpu0 = process_cpu_seconds();
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  int64_t first = 0;
  for (int64_t d = 0; d < m; ++d) {
    const int64_t count = o.sequences / m + (d < o.sequences % m ? 1 : 0);
    threads.emplace_back([&, d, first, count] {
      try {
        tokens[static_cast<size_t>(d)] =
            decode_share(head, o, first, count, w.config.vocab_size, r.transcripts);
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
      const net::LinkProxyCounters c = p->counters();
      r.wire_bytes += static_cast<int64_t>(c.bytes_to_target + c.bytes_to_client);
    }
  } else {
    // Without proxies each hop's payload is counted at its upper end: the head's frames and
    // answers, each stage's frames down and the answers that came back (the proxies also count
    // the 8-byte frame headers).
    r.wire_bytes = head.bytes_sent() + head.bytes_received();
    for (const auto& s : servers) {
      const pipeline::StageServerCounters c = s->counters();
      r.wire_bytes += c.bytes_down + c.bytes_from_next;
    }
  }
  for (StageChild& c : children) {
    r.stage_peak_rss.push_back(
        static_cast<int64_t>(read_process_memory(c.process.pid()).hwm_bytes));
    c.process.signal(SIGTERM);
    (void)c.process.wait_for(std::chrono::seconds(10));
  }
  if (o.processes) std::filesystem::remove_all(dir);
  return r;
}

nlohmann::json describe(const RunResult& r, const PipelineBenchOptions& o) {
  return {{"tokens", r.tokens},
          {"seconds", r.seconds},
          {"tokens_per_s", r.tokens / r.seconds},
          {"tokens_per_s_per_sequence", r.tokens / r.seconds / static_cast<double>(o.sequences)},
          {"wire_bytes", r.wire_bytes},
          {"wire_bytes_per_token", r.tokens > 0 ? static_cast<double>(r.wire_bytes) / r.tokens : 0},
          {"cpu_seconds", r.cpu_seconds},
          {"stage_peak_rss_bytes", r.stage_peak_rss}};
}

}  // namespace

int run_pipeline_bench(const PipelineBenchOptions& o) {
  STOA_CHECK(!(o.relay && o.processes), ErrorKind::kUnsupported,
             "--relay runs the stages as threads of the bench; not with --processes");
  STOA_CHECK(o.sequences > 0 && o.prompt_tokens > 0 && o.new_tokens > 0 && o.threads > 0,
             ErrorKind::kInvalidArgument, "sequences, prompt, new tokens and threads must be > 0");
  const ModelConfig config = preset_config(o.preset);
  const ModelWeights w = random_weights(config, kWeightSeed, kWeightStd);
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
  out["stages_as_processes"] = o.processes;
  out["relay"] = o.relay;
  out["cpu"] = cpu_model_name();
  out["cores"] = std::thread::hardware_concurrency();
  out["load_before"] = load_averages();
  // The whole model's rollouts: the K = 1 row, and what every pipeline's must equal.
  const RunResult whole = run_whole(w, o);
  for (int64_t k : o.stages) {
    nlohmann::json row;
    row["stages"] = k;
    if (k == 1) {
      row["whole"] = describe(whole, o);
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
      row["bit_identical_to_whole"] =
          direct.transcripts == whole.transcripts && linked.transcripts == whole.transcripts;
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
