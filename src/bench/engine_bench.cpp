// `stoa bench engine` (bench/engine_bench.h): our int8 engine beside llama.cpp on the same Q8_0
// GGUF, same machine, same run. For each preset: random weights → Q8_0 GGUF (export_gguf, one
// tensor at a time) → our engine loads that file (GgufTensorSource: the Q8_0 blocks verbatim on the
// int8 grid, never widened) and llama.cpp loads it through stoa-llama-oracle. Measured: prefill
// tok/s (one prompt), decode tok/s at batch 1, aggregate decode tok/s at batch 8 and 32 (one token
// of every sequence per step, greedy).
//
// The machine may be shared: ours and llama.cpp's runs alternate and each figure is the best of
// --reps repetitions; tokens per process-CPU-second are reported beside wall-clock tok/s, since
// wall time on a loaded machine counts the time the scheduler gave to others.
//
// With --backend vulkan the peer is llama.cpp's Vulkan build (stoa-llama-oracle-vulkan, the npm
// prebuilt @node-llama-cpp/linux-x64-vulkan of the same release) with every layer on the very
// device our backend computes on (chosen by its name), so both figures come from one device in
// one run; on a CPU device such as Mesa's lavapipe both share the machine's cores.
#include "bench/engine_bench.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/machine.h"
#include "core/process.h"
#include "core/process_run.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "engine/batch_decoder.h"
#include "engine/model_runner.h"
#include "gpu/engine_backend_choice.h"
#ifdef STOA_HAVE_VULKAN
#include "gpu/vulkan/vulkan_backend.h"
#endif
#include "kernels/matmul_int8_packed.h"
#include "kernels/targets.h"
#include "model/gguf_reader.h"
#include "model/gguf_source.h"
#include "model/gguf_writer.h"
#include "model/presets.h"
#include "model/tensor_source.h"
#include "model/weights.h"

namespace stoa::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Timing {
  double wall_s = 0;
  double cpu_s = 0;
};

template <typename Fn>
Timing timed(Fn&& fn) {
  const auto t0 = Clock::now();
  const double c0 = process_cpu_seconds();
  fn();
  return {std::chrono::duration<double>(Clock::now() - t0).count(), process_cpu_seconds() - c0};
}

// Best-of-5 memcpy bandwidth over 256 MiB (bytes copied per second, i.e. counting the read side
// only, the same way the weight bandwidth below counts weight bytes read).
double memcpy_gbps() {
  const size_t n = size_t{256} << 20;
  std::vector<char> a(n, 1), b(n, 2);
  double best = 0;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), n);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n) / s / 1e9);
  }
  return best;
}

// Our engine. Returns {tokens, timing} for a prefill or a decode figure.
struct OursBench {
  engine::EngineBackend& runner;  // the CPU engine or the Vulkan backend
  const EngineBenchOptions& opts;
  Rng rng{1234, 0};

  std::vector<int32_t> random_tokens(int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t)
      x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(runner.config().vocab_size)));
    return t;
  }

  std::pair<double, Timing> prefill() {
    const std::vector<int32_t> prompt = random_tokens(opts.prompt_tokens);
    std::unique_ptr<engine::SequenceState> seq = runner.new_state(opts.prompt_tokens + 1);
    seq->preallocate();
    const engine::BackendInput input[] = {{seq.get(), prompt, engine::Logits::kLast}};
    Timing t = timed([&] { runner.forward(input); });
    return {static_cast<double>(opts.prompt_tokens), t};
  }

  std::pair<double, Timing> decode(int64_t batch) {
    // The decode loop every rollout runs (BatchDecoder), greedy: one token of every sequence
    // per step; the budget outlasts the steps, so no sequence leaves early.
    engine::BatchDecoder decoder(runner, batch,
                                 opts.decode_prompt + opts.decode_warmup + opts.decode_steps + 1);
    engine::GenerateOptions greedy;
    greedy.sampling.temperature = 0;
    greedy.max_tokens = opts.decode_warmup + opts.decode_steps + 1;
    for (int64_t s = 0; s < batch; ++s) decoder.start(random_tokens(opts.decode_prompt), greedy);
    decoder.step();  // prefill: not timed
    // Warm-up: after an idle stretch (llama.cpp's run in between) the first decode steps were
    // measured ~25 % slower on this VM (bench-qwen3 batch 1, 2 threads, 32 steps: 221-240 tok/s
    // after a 300 ms pause, 317 without); llama.cpp's side gets the same untimed steps.
    for (int64_t i = 0; i < opts.decode_warmup; ++i) decoder.step();
    Timing t = timed([&] {
      for (int64_t i = 0; i < opts.decode_steps; ++i) decoder.step();
    });
    return {static_cast<double>(batch * opts.decode_steps), t};
  }
};

// The Vulkan device our backend computes on, by name ("" for the CPU engine): the peer is put
// on the device of that name.
std::string vulkan_device_name(const engine::EngineBackend& backend) {
#ifdef STOA_HAVE_VULKAN
  if (const auto* vk = dynamic_cast<const gpu::vulkan::VulkanBackend*>(&backend))
    return vk->device().info().name;
#endif
  (void)backend;
  return "";
}

// Runs stoa-llama-oracle bench (with `gpu_device`: the model on llama.cpp's GPU device of that
// name) and returns its JSON.
json run_oracle(const EngineBenchOptions& opts, const std::string& oracle, const std::string& gguf,
                const std::string& gpu_device, int64_t prompt, int64_t steps, int64_t batch) {
  std::vector<std::string> argv = {oracle,
                                   "bench",
                                   "--gguf",
                                   gguf,
                                   "--prompt-tokens",
                                   std::to_string(prompt),
                                   "--decode",
                                   std::to_string(steps),
                                   "--warmup",
                                   std::to_string(steps > 0 ? opts.decode_warmup : 0),
                                   "--batch",
                                   std::to_string(batch),
                                   "--threads",
                                   std::to_string(opts.threads)};
  if (!gpu_device.empty()) argv.insert(argv.end(), {"--gpu", gpu_device});
  const RunResult run = run_capture(argv);
  const int rc = run.status.code;
  const std::string& out = run.out;
  json j = json::parse(out, nullptr, false);
  STOA_CHECK(rc == 0 && !j.is_discarded() && !j.contains("error"), ErrorKind::kIo, oracle,
             " bench failed (exit ", rc, "): ", out);
  return j;
}

struct Best {
  double tps = 0;      // tokens per wall second
  double cpu_tps = 0;  // tokens per process-CPU second
  void add(double tokens, const Timing& t) {
    if (t.wall_s > 0) tps = std::max(tps, tokens / t.wall_s);
    if (t.cpu_s > 0) cpu_tps = std::max(cpu_tps, tokens / t.cpu_s);
  }
};

json bench_model(const EngineBenchOptions& opts, const std::string& preset,
                 const std::string& oracle, const std::string& workdir) {
  const ModelConfig config = preset_config(preset);
  int64_t params = 0;
  const std::string gguf = workdir + "/" + preset + ".q8_0.gguf";
  {
    // Made and written one tensor at a time: no f32 masters, so peak RSS reflects the engine.
    RandomTensorSource master(config, opts.seed);
    for (const TensorSpec& spec : master.specs()) params += shape_numel(spec.shape);
    GgufExportOptions eo;
    eo.type = GgufExportType::kQ8_0;
    eo.model_name = preset;
    export_gguf(master, gguf, eo);
  }

  // Our engine on the very blocks of that file.
  malloc_trim(0);
  // The process before the engine exists (in the full build mostly libtorch's resident pages).
  // VmRSS before loading and after the runs, both after handing freed heap back, brackets what
  // the engine holds (peak RSS is set by loading: the importer's dequantized copies).
  const uint64_t rss_before_load = own_process_memory().rss_bytes;
  // The int8 model once: Q8_0 tensors straight onto the grid (never widened), the rest f32.
  std::map<std::string, Int8Matrix> int8;
  std::map<std::string, Tensor> f32;
  GgufTensorSource source(gguf);
  const ModelConfig loaded_config = source.config();
  for (const TensorSpec& spec : source.specs()) {
    if (std::optional<Int8Matrix> m = source.int8(spec)) {
      int8.emplace(spec.name, std::move(*m));
    } else {
      f32.emplace(spec.name, source.f32(spec));
    }
  }
  ThreadPool pool(opts.threads);
  auto weights = std::make_unique<engine::EngineWeights>(
      engine::EngineWeights::from_state(loaded_config, std::move(int8), std::move(f32)));
  std::unique_ptr<engine::EngineBackend> backend;
  std::string device = "cpu";  // ours, in words
  if (opts.backend == "vulkan") {
    // The Vulkan backend after its golden self-test (--backend vulkan: an error in words when
    // no device passes); the host copy of the weights stays beside the device's.
    gpu::ChosenBackend chosen =
        gpu::make_engine_backend(gpu::BackendChoice::kVulkan, std::move(weights), &pool);
    device = chosen.note;
    backend = std::move(chosen.backend);
  } else {
    weights->set_backend(engine::parse_backend(opts.backend));
    backend = std::make_unique<engine::ModelRunner>(std::move(weights), &pool);
  }
  engine::EngineBackend& runner = *backend;
  const std::string gpu_device = vulkan_device_name(runner);
  STOA_CHECK(opts.backend != "vulkan" || !gpu_device.empty(), ErrorKind::kInternal,
             "--backend vulkan computed on no Vulkan device (", device, ")");
  std::string llama_device;  // what the peer reports it computed on  // Hand the freed heap back to
                             // the OS (glibc keeps it otherwise: the importer's copies, the
  // grid the engine released after packing), so that rss_after_runs_bytes shows what the
  // engine holds, not what loading left behind.
  malloc_trim(0);
  // The model's bytes (int8 grid + f32 tensors): what a batch-1 token streams. What the engine
  // holds may differ slightly (packed panels pad rows to 16 and scales to 64 B).
  size_t weight_bytes = 0;
  for (const auto& [name, l] : runner.host_weights().linears())
    weight_bytes += l.is_int8() ? l.int8_grid_nbytes() : l.f32().nbytes();
  for (const auto& [name, t] : runner.host_weights().vectors()) weight_bytes += t.nbytes();
  const size_t weight_bytes_held = runner.host_weights().nbytes();
  OursBench ours{runner, opts};

  const std::vector<std::string> keys = {"prefill_tps", "decode_tps_b1", "decode_tps_b8",
                                         "decode_tps_b32"};
  std::map<std::string, Best> best_ours, best_llama;
  auto key_of = [](int64_t b) { return "decode_tps_b" + std::to_string(b); };
  for (int rep = 0; rep < opts.reps; ++rep) {
    // Alternate ours / llama.cpp per figure so both see the same machine load.
    {
      auto [n, t] = ours.prefill();
      best_ours["prefill_tps"].add(n, t);
      if (!opts.no_llama) {
        json j = run_oracle(opts, oracle, gguf, gpu_device, opts.prompt_tokens, 0, 1);
        llama_device = j.value("device", "");
        best_llama["prefill_tps"].add(
            static_cast<double>(opts.prompt_tokens),
            {j["prefill_s"].get<double>(), j["prefill_cpu_s"].get<double>()});
      }
    }
    for (int64_t b : opts.batches) {
      auto [n, t] = ours.decode(b);
      best_ours[key_of(b)].add(n, t);
      if (!opts.no_llama) {
        json j =
            run_oracle(opts, oracle, gguf, gpu_device, opts.decode_prompt, opts.decode_steps, b);
        best_llama[key_of(b)].add(static_cast<double>(b * opts.decode_steps),
                                  {j["decode_s"].get<double>(), j["decode_cpu_s"].get<double>()});
      }
    }
  }
  // After the runs: the runner, its weights and scratch (the sequences are gone; their size is
  // kv_bytes_per_cached_token).
  malloc_trim(0);  // the freed sequences' caches
  const uint64_t engine_rss = own_process_memory().rss_bytes;
  std::error_code ec;
  std::filesystem::remove(gguf, ec);

  json out = {{"name", preset}, {"params", params}};
  json o, l, r, o_cpu, l_cpu, r_cpu;
  for (auto& [k, b] : best_ours) {
    o[k] = b.tps;
    o_cpu[k] = b.cpu_tps;
    if (!opts.no_llama) {
      l[k] = best_llama[k].tps;
      l_cpu[k] = best_llama[k].cpu_tps;
      r[k] = best_llama[k].tps > 0 ? b.tps / best_llama[k].tps : 0.0;
      r_cpu[k] = best_llama[k].cpu_tps > 0 ? b.cpu_tps / best_llama[k].cpu_tps : 0.0;
    }
  }
  out["ours"] = o;
  out["llama_cpp"] = opts.no_llama ? json(nullptr) : l;
  out["ratio"] = opts.no_llama ? json(nullptr) : r;
  // Tokens per process-CPU-second: the comparison that survives a loaded machine.
  out["per_cpu_second"] = {{"ours", o_cpu},
                           {"llama_cpp", opts.no_llama ? json(nullptr) : l_cpu},
                           {"ratio", opts.no_llama ? json(nullptr) : r_cpu}};
  out["weight_bytes"] = weight_bytes;
  out["weight_bytes_held"] = weight_bytes_held;
  out["device"] = device;
  // The device's own name (the Vulkan device; "cpu" for the CPU engine) and the peer's.
  out["device_name"] = gpu_device.empty() ? std::string("cpu") : gpu_device;
  out["llama_cpp_device"] = opts.no_llama ? json(nullptr) : json(llama_device);
  out["rss_before_load_bytes"] = rss_before_load;
  out["rss_after_runs_bytes"] = engine_rss;
  // Everything this process did so far (earlier presets too); the int8 model is loaded once.
  out["peak_rss_bytes"] = own_process_memory().hwm_bytes;
  // Ratios against llama.cpp are only quotable on a quiet machine (its threads spin).
  out["load_average"] = load_average_1m();
  // Batch-1 decode streams every weight once per token (the embedding table aside: one row).
  out["weight_gbps_b1"] = best_ours["decode_tps_b1"].tps * static_cast<double>(weight_bytes) / 1e9;
  int64_t attn_layers = 0;
  for (int64_t i = 0; i < config.num_layers; ++i)
    attn_layers += config.is_attention_layer(i) ? 1 : 0;
  out["kv_bytes_per_cached_token"] =
      attn_layers * 2 * config.num_kv_heads * config.head_dim * static_cast<int64_t>(sizeof(float));
  out["conv_state_bytes_per_sequence"] = (config.num_layers - attn_layers) *
                                         (config.conv_kernel - 1) * config.hidden_size *
                                         static_cast<int64_t>(sizeof(float));
  return out;
}

}  // namespace

int run_engine_bench(EngineBenchOptions opts) {
  if (opts.quick) {
    opts.prompt_tokens = std::min<int64_t>(opts.prompt_tokens, 128);
    opts.decode_steps = std::min<int64_t>(opts.decode_steps, 8);
    opts.decode_warmup = std::min<int64_t>(opts.decode_warmup, 2);
    opts.decode_prompt = std::min<int64_t>(opts.decode_prompt, 16);
    opts.reps = 1;
  }
  STOA_CHECK(opts.threads >= 1 && opts.reps >= 1 && opts.prompt_tokens >= 1 &&
                 opts.decode_steps >= 1 && opts.decode_prompt >= 1 && opts.decode_warmup >= 0,
             ErrorKind::kInvalidArgument,
             "--threads, --reps, --prompt-tokens, --decode-steps, --decode-prompt must be >= 1, "
             "--decode-warmup >= 0");
  if (opts.backend != "vulkan")
    (void)engine::parse_backend(opts.backend);  // fail before the slow part
  // The peer: llama.cpp's CPU build, or its Vulkan build beside our Vulkan backend.
  const bool vulkan = opts.backend == "vulkan";
  const std::string harness = vulkan ? "stoa-llama-oracle-vulkan" : "stoa-llama-oracle";
  const std::string oracle =
      opts.oracle.empty()
          ? (std::filesystem::path(self_executable()).parent_path() / harness).string()
          : opts.oracle;
  if (!opts.no_llama) {
    STOA_CHECK(access(oracle.c_str(), X_OK) == 0, ErrorKind::kNotFound, "llama.cpp harness '",
               oracle, "' not found or not executable (build ", harness,
               vulkan ? ", which needs scripts/setup to have installed the npm package "
                        "@node-llama-cpp/linux-x64-vulkan and the Vulkan loader"
                      : "",
               "; pass --oracle, or --no-llama)");
  }
  std::string workdir = opts.workdir;
  if (workdir.empty()) {
    workdir =
        (std::filesystem::temp_directory_path() / ("stoa-bench-engine-" + std::to_string(getpid())))
            .string();
  }
  std::filesystem::create_directories(workdir);

  json result = {{"threads", opts.threads}, {"cpu", cpu_model_name()}};
  result["backend"] = opts.backend;
  result["peer"] =
      opts.no_llama ? json(nullptr) : json(vulkan ? "llama.cpp vulkan" : "llama.cpp cpu");
  result["kernel_target"] = kernels::target_name(kernels::active_target());
  result["w8a8_layout"] = kernels::packed_w8a8_preferred() ? "packed16" : "row_major";
  result["prompt_tokens"] = opts.prompt_tokens;
  result["decode_prompt_tokens"] = opts.decode_prompt;
  result["decode_steps"] = opts.decode_steps;
  result["decode_warmup"] = opts.decode_warmup;
  result["reps"] = opts.reps;
  json models = json::array();
  for (const std::string& preset : opts.presets) {
    models.push_back(bench_model(opts, preset, oracle, workdir));
    if (!opts.json_out) std::fprintf(stderr, "%s\n", models.back().dump(2).c_str());
  }
  if (opts.workdir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(workdir, ec);
  }
  result["models"] = models;
  // Peak RSS of the model runs (every preset's master f32 weights, GGUF import and engine),
  // taken before the memcpy probe's own buffers.
  result["peak_rss_bytes"] = own_process_memory().hwm_bytes;
  result["memcpy_gbps"] = memcpy_gbps();
  std::printf("%s\n", result.dump(opts.json_out ? -1 : 2).c_str());
  return 0;
}

}  // namespace stoa::bench
