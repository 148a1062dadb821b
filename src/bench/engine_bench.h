// `stoa bench engine`: our int8 engine beside llama.cpp on the same Q8_0 GGUF, same machine,
// same run (the measurement is described in engine_bench.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::bench {

struct EngineBenchOptions {
  std::vector<std::string> presets = {"bench-qwen3", "bench-lfm2moe"};
  int threads = 2;
  bool json_out = false;  // one-line JSON on stdout
  bool quick = false;
  int64_t prompt_tokens = 512;  // the prefill figure's prompt
  int64_t decode_prompt = 32;   // prompt of each sequence before the decode figures
  int64_t decode_steps = 32;
  int64_t decode_warmup = 16;  // untimed decode steps before the timed ones (both engines)
  std::vector<int64_t> batches = {1, 8, 32};
  int reps = 3;
  // The peer harness: stoa-llama-oracle, or stoa-llama-oracle-vulkan (llama.cpp's Vulkan build,
  // on our backend's device) with backend "vulkan"; default: next to this binary.
  std::string oracle;
  bool no_llama = false;
  std::string backend = "w8a8";  // or "vulkan": the Vulkan backend (gpu/vulkan)
  std::string workdir;           // where the GGUF goes; default: a temp dir
  uint64_t seed = 1;
};

// Prints the report (one-line JSON with json_out); returns the exit status. kInvalidArgument for
// bad counts or an unknown backend, kNotFound when the llama.cpp harness is missing (and
// no_llama is off), kUnsupported when --backend vulkan finds no usable Vulkan device, kIo when the
// peer fails (its words: e.g. no Vulkan device of our device's name in llama.cpp's list).
int run_engine_bench(EngineBenchOptions options);

}  // namespace stoa::bench
