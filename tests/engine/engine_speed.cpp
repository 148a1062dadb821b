// engine_speed: a profiling harness for the engine alone (not a test). The same figures as
// `stoa bench engine` (prefill of one prompt; decode at batch B, one token of every sequence
// per pass) on the same Q8_0 GGUF, without the CLI, so that perf can be pointed at one figure:
//
//   engine_speed <preset> <figure: prefill|b1|b8|b32|all> [reps] [threads] [steps]
//   perf record -g engine_speed bench-qwen3 b1 5 2
//
// The GGUF is written once to $TMPDIR/engine_speed/<preset>.q8_0.gguf (seed 1, as the bench)
// and reused; point stoa-llama-oracle bench at it for llama.cpp's side.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/machine.h"
#include "engine/model_runner.h"
#include "model/gguf_reader.h"
#include "model/gguf_writer.h"
#include "model/presets.h"
#include "model/weights.h"

using namespace stoa;

namespace {

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int32_t> tokens(int64_t n, int64_t vocab, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = pick(rng);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <preset> <prefill|b1|b8|b32|all> [reps] [threads] [steps]\n",
                 argv[0]);
    return 2;
  }
  const std::string preset = argv[1];
  const std::string figure = argv[2];
  const int reps = argc > 3 ? std::atoi(argv[3]) : 3;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
  const int64_t steps = argc > 5 ? std::atoll(argv[5]) : 32;
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/engine_speed";
  std::filesystem::create_directories(dir);
  const std::string gguf = dir + "/" + preset + ".q8_0.gguf";
  if (!std::filesystem::exists(gguf)) {
    const ModelWeights master = random_weights(preset_config(preset), 1);
    GgufExportOptions eo;
    eo.type = GgufExportType::kQ8_0;
    eo.model_name = preset;
    export_gguf(master, gguf + ".tmp", eo);
    std::filesystem::rename(gguf + ".tmp", gguf);
  }
  std::map<std::string, Int8Matrix> int8;
  ModelWeights imported = import_gguf(gguf, &int8);
  std::map<std::string, Tensor> f32;
  for (auto& [name, t] : imported.tensors) {
    if (!int8.count(name)) f32.emplace(name, std::move(t));
  }
  imported.tensors.clear();
  ThreadPool pool(threads);
  engine::ModelRunner runner(
      engine::EngineWeights::from_state(imported.config, std::move(int8), std::move(f32)), &pool);
  const int64_t V = runner.config().vocab_size;
  std::mt19937 rng(1234);

  auto report = [&](const char* name, double n, double wall, double cpu) {
    std::printf("%s %s: %.1f tok/s wall, %.1f tok/CPU-s (%.3f s, cpu %.3f s)\n", preset.c_str(),
                name, n / wall, n / cpu, wall, cpu);
    std::fflush(stdout);
  };
  for (int rep = 0; rep < reps; ++rep) {
    if (figure == "prefill" || figure == "all") {
      const int64_t P = 512;
      std::vector<int32_t> prompt = tokens(P, V, rng);
      engine::Sequence seq = runner.new_sequence(P + 1);
      seq.preallocate();
      const double w0 = wall_now(), c0 = stoa::process_cpu_seconds();
      runner.append(seq, prompt, engine::Logits::kLast);
      report("prefill", static_cast<double>(P), wall_now() - w0, stoa::process_cpu_seconds() - c0);
    }
    for (int64_t batch : {1, 8, 32}) {
      if (figure != "all" && figure != "b" + std::to_string(batch)) continue;
      std::vector<engine::Sequence> seqs;
      std::vector<std::vector<int32_t>> prompts;
      for (int64_t s = 0; s < batch; ++s) {
        seqs.push_back(runner.new_sequence(32 + steps + 1));
        seqs.back().preallocate();
        prompts.push_back(tokens(32, V, rng));
      }
      std::vector<engine::SequenceInput> inputs(static_cast<size_t>(batch));
      for (size_t s = 0; s < inputs.size(); ++s)
        inputs[s] = {&seqs[s], prompts[s], engine::Logits::kLast};
      engine::PassLogits logits = runner.append_batch_view(inputs);
      std::vector<int32_t> next(static_cast<size_t>(batch));
      const double w0 = wall_now(), c0 = stoa::process_cpu_seconds();
      for (int64_t step = 0; step < steps; ++step) {
        for (size_t s = 0; s < inputs.size(); ++s) {
          const float* row = logits.last(s).data();
          next[s] = static_cast<int32_t>(std::max_element(row, row + V) - row);
          inputs[s].tokens = std::span<const int32_t>(&next[s], 1);
        }
        logits = runner.append_batch_view(inputs);
      }
      const std::string name = "decode b" + std::to_string(batch);
      report(name.c_str(), static_cast<double>(batch * steps), wall_now() - w0,
             stoa::process_cpu_seconds() - c0);
    }
  }
  return 0;
}
