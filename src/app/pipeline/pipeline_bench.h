// `stoa bench pipeline` (docs/design/pipeline.md): rollouts through K-stage pipelines of a model
// cut so that no stage holds more than its share, over real TCP between stage servers — once
// with direct loopback links (the same machines' compute without links) and once behind
// emulated home links (the delaying proxy of app/fleet: a rate each way and a round trip per
// hop) — and the whole model on one engine (K = 1). Reports tokens/s aggregate and per
// sequence, bytes on the wire per token and the efficiency, linked ÷ direct, per K. With
// --processes the stages are `stoa stage` processes and each one's peak resident set is
// measured.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::app {

struct PipelineBenchOptions {
  std::string preset = "bench-qwen3";  // random weights of this shape
  std::vector<int64_t> stages = {1, 2, 4};
  int64_t sequences = 16;     // in flight in total
  int64_t micro_batches = 0;  // decoders at the head, each with its share; 0: 2 K
  int64_t prompt_tokens = 32;
  int64_t new_tokens = 48;
  double rate_mbit = 50;  // each way, per hop
  double rtt_ms = 40;     // per hop
  int64_t threads = 1;    // engine threads of each stage (and of the K = 1 engine)
  // Stages 1..K-1 as `stoa stage` processes (each loading only its span) instead of threads
  // of the bench; their peak resident sets are reported.
  bool processes = false;
  // Every hop through a relay (the stages behind NAT): each side dials it over its own link.
  bool relay = false;
  bool json_out = false;
};

int run_pipeline_bench(const PipelineBenchOptions& options);

}  // namespace stoa::app
