#include "roles/pipeline/stage_main.h"

#include <csignal>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine_weights.h"
#include "engine/pipeline_stage.h"
#include "model/gguf_source.h"
#include "model/layer_span.h"
#include "model/presets.h"
#include "net/frame_socket.h"
#include "roles/pipeline/stage_server.h"

namespace stoa::pipeline {

int run_stage(const StageMainOptions& o) {
  STOA_CHECK(o.model_dir.empty() != o.preset.empty(), ErrorKind::kInvalidArgument,
             "a stage loads --model DIR or --preset NAME (one of them)");
  STOA_CHECK(o.index >= 1 && o.index < o.stages, ErrorKind::kInvalidArgument, "stage ", o.index,
             " of ", o.stages, ": stages after the head are 1 .. ", o.stages - 1);
  STOA_CHECK(o.threads > 0, ErrorKind::kInvalidArgument, "a stage needs a thread");
  // The signals are waited for below; blocked before any thread starts, so every thread
  // inherits the mask and none of them takes the signal instead.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  std::unique_ptr<TensorSource> source;
  if (!o.model_dir.empty()) {
    source = open_model_dir_source(o.model_dir);
  } else {
    source = std::make_unique<RandomTensorSource>(preset_config(o.preset), o.seed, o.std);
  }
  const LayerSpan span = split_layers(source->config(), o.stages)[static_cast<size_t>(o.index)];
  const bool last = o.index == o.stages - 1;
  STOA_CHECK(last == o.next.empty(), ErrorKind::kInvalidArgument,
             last ? "the last stage has no --next" : "a stage before the last needs --next");
  auto weights = std::make_unique<engine::EngineWeights>(
      engine::EngineWeights::from_source(*source, engine::WeightFormat::kInt8, span));
  source.reset();
  const int64_t weight_bytes = static_cast<int64_t>(weights->nbytes());
  ThreadPool pool(static_cast<int>(o.threads));
  StageServerOptions so;
  std::tie(so.listen_host, so.listen_port) = net::parse_host_port(o.listen, "--listen");
  if (!last) std::tie(so.next_host, so.next_port) = net::parse_host_port(o.next, "--next");
  STOA_CHECK(o.relay.empty() == o.key.empty(), ErrorKind::kInvalidArgument,
             "--relay and --key go together");
  if (!o.relay.empty()) {
    std::tie(so.relay_host, so.relay_port) = net::parse_host_port(o.relay, "--relay");
    so.relay_key = o.key;
  }
  so.next_relay_key = o.next_key;
  StageServer server(std::make_unique<engine::PipelineStage>(std::move(weights), nullptr, &pool),
                     so);
  const nlohmann::json ready = {{"stage", o.index},
                                {"port", server.port()},
                                {"layers", {span.first, span.last}},
                                {"weight_bytes", weight_bytes}};
  std::printf("%s\n", ready.dump().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  server.stop();
  return 0;
}

}  // namespace stoa::pipeline
