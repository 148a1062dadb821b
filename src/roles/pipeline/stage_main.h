// `stoa stage`: one pipeline stage as a process of its own (docs/design/pipeline.md) — the
// span's tensors streamed from a model directory (or a preset's seeded random weights, for
// benches), a StageServer on the given address (or behind a relay), the next stage's address. It
// prints one JSON line when it serves ({"stage": i, "port": p, "layers": [a, b], "weight_bytes":
// n}) and serves until SIGINT or SIGTERM.
#pragma once
#include <cstdint>
#include <string>

namespace stoa::pipeline {

struct StageMainOptions {
  std::string model_dir;  // a Hugging Face model directory, or empty for `preset`
  std::string preset;
  uint64_t seed = 1234;
  float std = 0.05f;
  int64_t stages = 2;  // the pipeline's length
  int64_t index = 1;   // this stage's place, 1 .. stages - 1 (0 is the head)
  std::string listen = "127.0.0.1:0";
  std::string next;  // host:port of the stage after, empty on the last
  // Behind NAT (stage_relay.h): serve through the relay at `relay` under `key` instead of
  // listening; reach the next stage through the relay at `next` under `next_key`.
  std::string relay;
  std::string key;
  std::string next_key;
  int64_t threads = 1;
};

int run_stage(const StageMainOptions& options);

}  // namespace stoa::pipeline
