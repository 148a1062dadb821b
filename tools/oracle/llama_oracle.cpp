// stoa-llama-oracle: a thin harness around the prebuilt llama.cpp libraries of the npm package
// @node-llama-cpp/linux-x64, used by the parity tests (independent model math) and by the engine
// benchmarks (the performance peer). It links only llama.cpp — nothing of Stoa — so it is an
// independent implementation of every architecture it loads. The same source built against
// @node-llama-cpp/linux-x64-vulkan is stoa-llama-oracle-vulkan, the peer of
// `stoa bench engine --backend vulkan`.
//
// Every command takes [--gpu NAME]: the whole model on the ggml GPU device whose name or
// description contains NAME ("any": the first GPU device), e.g. llama.cpp's Vulkan device; an
// error naming the devices there are when none matches. Without it the model stays on the CPU.
//
//   stoa-llama-oracle info   --gguf F
//   stoa-llama-oracle logits --gguf F --tokens FILE --out FILE [--prefill N] [--threads 1]
//                            [--lora ADAPTER.gguf]
//       Feeds token ids (whitespace-separated text) directly — no tokenizer involved: the first
//       N tokens (default: half) in one batch, then the rest one token per llama_decode, reusing
//       the KV cache / conv state. Writes the logits of every position as raw little-endian f32
//       [n_tokens][n_vocab] and prints a JSON summary. --lora: a LoRA adapter GGUF loaded onto the
//       model (llama_adapter_lora_init) and set on the context at scale 1
//       (llama_set_adapters_lora), so llama.cpp computes W·x + (alpha / r)·B·A·x itself.
//   stoa-llama-oracle bench  --gguf F [--prompt-tokens 512] [--decode 64] [--warmup 0] [--batch 1]
//                            [--threads 2] [--seed 1] [--kv-f32]
//       Prefills `batch` sequences of random prompt tokens, then decodes `decode` steps with one
//       token per sequence in a single llama_batch (several sequence ids, greedy next tokens).
//       Prints JSON with prefill tok/s and aggregate decode tok/s (wall clock), plus the process
//       CPU seconds of each phase and the device that computed.
//
//   stoa-llama-oracle regguf --gguf IN --out OUT
//       Reads IN with ggml's own GGUF parser and writes it back with ggml's writer: a second,
//       independent GGUF implementation for Stoa's writer and reader to agree with.
//
// Every result goes to stdout as one JSON object; failures print {"error": ...} and exit 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#ifdef STOA_LLAMA_VULKAN
#include <vulkan/vulkan.h>
#endif

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string command;
  std::map<std::string, std::string> values;
  bool flag(const std::string& name) const { return values.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
  std::string need(const std::string& name) const {
    auto it = values.find(name);
    if (it == values.end() || it->second.empty()) throw std::runtime_error("missing --" + name);
    return it->second;
  }
  long integer(const std::string& name, long fallback) const {
    auto it = values.find(name);
    if (it == values.end()) return fallback;
    char* end = nullptr;
    long v = std::strtol(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end != '\0')
      throw std::runtime_error("--" + name + " needs an integer, got '" + it->second + "'");
    return v;
  }
};

Args parse_args(int argc, char** argv) {
  Args args;
  if (argc < 2)
    throw std::runtime_error("usage: stoa-llama-oracle info|logits|bench|regguf --gguf F ...");
  args.command = argv[1];
  static const char* kFlags[] = {"kv-f32", "verbose"};
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) throw std::runtime_error("unexpected argument '" + a + "'");
    std::string name = a.substr(2);
    bool is_flag =
        std::any_of(std::begin(kFlags), std::end(kFlags), [&](const char* f) { return name == f; });
    if (is_flag) {
      args.values.insert_or_assign(
          name, std::string(1, '1'));  // (GCC 12 -Wrestrict false positive on = "1")
      continue;
    }
    if (i + 1 >= argc) throw std::runtime_error("--" + name + " needs a value");
    args.values[name] = argv[++i];
  }
  return args;
}

bool g_verbose = false;

void log_callback(ggml_log_level level, const char* text, void*) {
  if (g_verbose || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

// The --gpu device (null: the CPU).
ggml_backend_dev_t g_gpu = nullptr;

bool is_gpu(ggml_backend_dev_t dev) {
  const enum ggml_backend_dev_type type = ggml_backend_dev_type(dev);
  return type == GGML_BACKEND_DEVICE_TYPE_GPU || type == GGML_BACKEND_DEVICE_TYPE_IGPU;
}

// The GPU device named like `wanted` ("any": the first); throws naming what there is.
ggml_backend_dev_t find_gpu(const std::string& wanted, const std::string& dir) {
  std::string seen;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    const std::string name = ggml_backend_dev_name(dev);
    const std::string desc = ggml_backend_dev_description(dev);
    if (!is_gpu(dev)) continue;
    seen += (seen.empty() ? "" : ", ") + name + " (" + desc + ")";
    if (wanted == "any" || name.find(wanted) != std::string::npos ||
        desc.find(wanted) != std::string::npos)
      return dev;
  }
  if (seen.empty())
    throw std::runtime_error("no GPU device in the ggml backends loaded from '" + dir +
                             "' (a llama.cpp build with a GPU backend, e.g. "
                             "@node-llama-cpp/linux-x64-vulkan, and a Vulkan driver are needed)");
  throw std::runtime_error("no GPU device named like '" + wanted + "' (there are: " + seen + ")");
}

#ifdef STOA_LLAMA_VULKAN
// ggml's Vulkan backend lists no device of type CPU (Mesa's lavapipe) unless
// GGML_VK_VISIBLE_DEVICES names it; with --gpu every Vulkan device is made visible (indices
// 0..n-1 as the loader enumerates them) so that the device is found by name like any other. A
// caller's own GGML_VK_VISIBLE_DEVICES is kept.
void make_every_vulkan_device_visible() {
  if (std::getenv("GGML_VK_VISIBLE_DEVICES") != nullptr) return;
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  if (vkCreateInstance(&info, nullptr, &instance) != VK_SUCCESS) return;  // no loader or driver
  uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance, &count, nullptr);
  vkDestroyInstance(instance, nullptr);
  std::string visible;
  for (uint32_t i = 0; i < count; ++i) visible += (i ? "," : "") + std::to_string(i);
  if (!visible.empty()) setenv("GGML_VK_VISIBLE_DEVICES", visible.c_str(), 1);
}
#endif

// Loads the CPU backend variants (libggml-cpu-*.so) next to the llama library; ggml picks the
// best one this CPU supports. In the Vulkan build libggml-vulkan.so is loaded from there too.
void init_backends(const Args& args) {
  llama_log_set(log_callback, nullptr);
  ggml_log_set(log_callback, nullptr);
  std::string dir = args.get("backend-dir");
  if (dir.empty()) {
    const char* env = std::getenv("STOA_LLAMA_BACKEND_DIR");
    dir = env ? env : STOA_LLAMA_BINS_DIR;
  }
#ifdef STOA_LLAMA_VULKAN
  if (args.flag("gpu")) make_every_vulkan_device_visible();
#endif
  ggml_backend_load_all_from_path(dir.c_str());
  if (ggml_backend_dev_count() == 0)
    throw std::runtime_error("no ggml backend could be loaded from '" + dir + "'");
  if (args.flag("gpu")) g_gpu = find_gpu(args.get("gpu"), dir);
  llama_backend_init();
}

std::string device_description() {
  return g_gpu ? std::string(ggml_backend_dev_description(g_gpu)) : std::string("CPU");
}

struct Model {
  llama_model* model = nullptr;
  llama_context* ctx = nullptr;
  ~Model() {
    if (ctx) llama_free(ctx);
    if (model) llama_model_free(model);
  }
};

void load_model(Model* m, const std::string& path) {
  llama_model_params mp = llama_model_default_params();
  // A null-terminated list: the --gpu device alone, every layer on it.
  static ggml_backend_dev_t gpu_only[2] = {nullptr, nullptr};
  gpu_only[0] = g_gpu;
  mp.devices = g_gpu ? gpu_only : nullptr;
  mp.n_gpu_layers = g_gpu ? 9999 : 0;
  m->model = llama_model_load_from_file(path.c_str(), mp);
  if (!m->model) throw std::runtime_error("llama.cpp could not load '" + path + "'");
}

void make_context(Model* m, uint32_t n_ctx, uint32_t n_batch, uint32_t n_seq, int threads,
                  bool f32_cache, bool parity) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n_ctx;
  cp.n_batch = n_batch;
  cp.n_ubatch = n_batch;
  cp.n_seq_max = n_seq;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = true;
  if (f32_cache) {
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
  }
  // Parity runs keep everything in f32: the flash-attention path accumulates in f16 on CPU.
  if (parity) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  m->ctx = llama_init_from_model(m->model, cp);
  if (!m->ctx) throw std::runtime_error("llama.cpp could not create a context");
}

int32_t n_vocab_of(const Model& m) {
  return llama_vocab_n_tokens(llama_model_get_vocab(m.model));
}

struct Batch {
  llama_batch b;
  explicit Batch(int32_t capacity) : b(llama_batch_init(capacity, 0, 1)) {}
  ~Batch() { llama_batch_free(b); }
  void clear() { b.n_tokens = 0; }
  void add(llama_token token, llama_pos pos, llama_seq_id seq, bool logits) {
    int32_t i = b.n_tokens++;
    b.token[i] = token;
    b.pos[i] = pos;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = seq;
    b.logits[i] = logits ? 1 : 0;
  }
};

void decode(Model& m, Batch& batch) {
  int32_t rc = llama_decode(m.ctx, batch.b);
  if (rc != 0) throw std::runtime_error("llama_decode failed with code " + std::to_string(rc));
}

// Process CPU seconds (all threads): on a shared machine wall time includes waiting for a core,
// so benchmarks report both.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<llama_token> read_tokens(const std::string& path, int32_t n_vocab) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open tokens file '" + path + "'");
  std::vector<llama_token> tokens;
  long long v;
  while (in >> v) {
    if (v < 0 || v >= n_vocab)
      throw std::runtime_error("token id " + std::to_string(v) + " in '" + path +
                               "' is outside the vocabulary of " + std::to_string(n_vocab));
    tokens.push_back(static_cast<llama_token>(v));
  }
  if (!in.eof()) throw std::runtime_error("tokens file '" + path + "' holds a non-integer");
  if (tokens.empty()) throw std::runtime_error("tokens file '" + path + "' is empty");
  return tokens;
}

nlohmann::json cmd_info(const Args& args) {
  Model m;
  load_model(&m, args.need("gguf"));
  char desc[256] = {};
  llama_model_desc(m.model, desc, sizeof(desc));
  return {{"desc", desc},
          {"n_vocab", n_vocab_of(m)},
          {"n_layer", llama_model_n_layer(m.model)},
          {"n_embd", llama_model_n_embd(m.model)},
          {"n_head", llama_model_n_head(m.model)},
          {"n_head_kv", llama_model_n_head_kv(m.model)},
          {"n_params", llama_model_n_params(m.model)},
          {"device", device_description()},
          {"size_bytes", llama_model_size(m.model)}};
}

nlohmann::json cmd_logits(const Args& args) {
  Model m;
  load_model(&m, args.need("gguf"));
  const int32_t n_vocab = n_vocab_of(m);
  std::vector<llama_token> tokens = read_tokens(args.need("tokens"), n_vocab);
  const int32_t n = static_cast<int32_t>(tokens.size());
  const long prefill = args.integer("prefill", n / 2);
  if (prefill < 1 || prefill > n)
    throw std::runtime_error("--prefill must be in 1.." + std::to_string(n));
  // One thread by default: ggml's worker threads spin-wait between ops, which on a loaded
  // 2-core machine turns a millisecond step into seconds; parity does not need speed.
  const int threads = static_cast<int>(args.integer("threads", 1));
  make_context(&m, static_cast<uint32_t>(std::max(n, 32)), static_cast<uint32_t>(prefill), 1,
               threads, /*f32_cache=*/true, /*parity=*/true);
  nlohmann::json lora = nullptr;
  if (args.flag("lora")) {
    const std::string path = args.need("lora");
    // Freed with the model (llama.h): no handle to keep.
    llama_adapter_lora* adapter = llama_adapter_lora_init(m.model, path.c_str());
    if (!adapter)
      throw std::runtime_error("llama.cpp could not load the LoRA adapter '" + path + "'");
    float scale = 1.0f;
    if (llama_set_adapters_lora(m.ctx, &adapter, 1, &scale) != 0)
      throw std::runtime_error("llama.cpp could not set the LoRA adapter '" + path + "'");
    char alpha[64] = {};
    llama_adapter_meta_val_str(adapter, "adapter.lora.alpha", alpha, sizeof(alpha));
    lora = {{"path", path}, {"alpha", alpha}};
  }

  std::vector<float> logits(static_cast<size_t>(n) * static_cast<size_t>(n_vocab));
  auto take = [&](int32_t batch_index, int32_t position) {
    const float* row = llama_get_logits_ith(m.ctx, batch_index);
    if (!row)
      throw std::runtime_error("llama.cpp returned no logits for position " +
                               std::to_string(position));
    std::memcpy(logits.data() + static_cast<size_t>(position) * n_vocab, row,
                sizeof(float) * static_cast<size_t>(n_vocab));
  };
  Batch batch(std::max<int32_t>(static_cast<int32_t>(prefill), 1));
  auto t0 = Clock::now();
  for (int32_t i = 0; i < prefill; ++i) batch.add(tokens[i], i, 0, true);
  decode(m, batch);
  for (int32_t i = 0; i < prefill; ++i) take(i, i);
  double prefill_s = seconds_since(t0);
  auto t1 = Clock::now();
  for (int32_t i = static_cast<int32_t>(prefill); i < n; ++i) {
    batch.clear();
    batch.add(tokens[i], i, 0, true);
    decode(m, batch);
    take(0, i);
  }
  double decode_s = seconds_since(t1);

  std::string out_path = args.need("out");
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(logits.data()),
            static_cast<std::streamsize>(logits.size() * sizeof(float)));
  if (!out.good()) throw std::runtime_error("cannot write '" + out_path + "'");
  return {
      {"n_tokens", n},        {"n_vocab", n_vocab}, {"prefill", prefill}, {"prefill_s", prefill_s},
      {"decode_s", decode_s}, {"out", out_path},    {"lora", lora}};
}

nlohmann::json cmd_bench(const Args& args) {
  Model m;
  load_model(&m, args.need("gguf"));
  const int32_t n_vocab = n_vocab_of(m);
  const long prompt = args.integer("prompt-tokens", 512);
  const long steps = args.integer("decode", 64);
  const long n_seq = args.integer("batch", 1);
  const long warmup = args.integer("warmup", 0);
  const int threads = static_cast<int>(args.integer("threads", 2));
  if (prompt < 1 || steps < 0 || warmup < 0 || n_seq < 1 || n_seq > 256)
    throw std::runtime_error(
        "need --prompt-tokens >= 1, --decode >= 0, --warmup >= 0, --batch in 1..256");
  const uint32_t n_ctx = static_cast<uint32_t>(n_seq * (prompt + warmup + steps) + 16);
  const uint32_t n_batch = static_cast<uint32_t>(std::max(prompt, n_seq));
  make_context(&m, n_ctx, n_batch, static_cast<uint32_t>(n_seq), threads, args.flag("kv-f32"),
               /*parity=*/false);

  std::mt19937 rng(static_cast<uint32_t>(args.integer("seed", 1)));
  std::uniform_int_distribution<llama_token> pick(0, n_vocab - 1);
  Batch batch(static_cast<int32_t>(n_batch));
  std::vector<llama_token> next(static_cast<size_t>(n_seq));

  auto argmax = [&](int32_t batch_index) {
    const float* row = llama_get_logits_ith(m.ctx, batch_index);
    if (!row) throw std::runtime_error("llama.cpp returned no logits");
    return static_cast<llama_token>(std::max_element(row, row + n_vocab) - row);
  };

  // On a GPU the first pass of each shape builds its pipelines (seconds on lavapipe): one untimed
  // prompt and one untimed step of every sequence first, then the cache is emptied again.
  if (g_gpu) {
    batch.clear();
    for (long i = 0; i < prompt; ++i)
      batch.add(pick(rng), static_cast<llama_pos>(i), 0, i == prompt - 1);
    decode(m, batch);
    llama_memory_clear(llama_get_memory(m.ctx), true);
    batch.clear();
    for (long s = 0; s < n_seq; ++s) batch.add(pick(rng), 0, static_cast<llama_seq_id>(s), true);
    decode(m, batch);
    llama_memory_clear(llama_get_memory(m.ctx), true);
  }
  // Prefill: one prompt per sequence id, each in one llama_batch (logits only for the last).
  auto t0 = Clock::now();
  double c0 = cpu_seconds();
  for (long s = 0; s < n_seq; ++s) {
    batch.clear();
    for (long i = 0; i < prompt; ++i)
      batch.add(pick(rng), static_cast<llama_pos>(i), static_cast<llama_seq_id>(s),
                i == prompt - 1);
    decode(m, batch);
    next[static_cast<size_t>(s)] = argmax(batch.b.n_tokens - 1);
  }
  double prefill_s = seconds_since(t0);
  double prefill_cpu_s = cpu_seconds() - c0;

  // Decode: every step carries one token of every sequence in a single llama_batch; the first
  // `warmup` steps are not timed.
  long position = prompt;
  auto decode_step = [&] {
    batch.clear();
    for (long s = 0; s < n_seq; ++s)
      batch.add(next[static_cast<size_t>(s)], static_cast<llama_pos>(position),
                static_cast<llama_seq_id>(s), true);
    decode(m, batch);
    for (long s = 0; s < n_seq; ++s) next[static_cast<size_t>(s)] = argmax(static_cast<int32_t>(s));
    ++position;
  };
  for (long step = 0; step < warmup; ++step) decode_step();
  auto t1 = Clock::now();
  double c1 = cpu_seconds();
  for (long step = 0; step < steps; ++step) decode_step();
  double decode_s = seconds_since(t1);
  double decode_cpu_s = cpu_seconds() - c1;
  double prefill_tokens = static_cast<double>(prompt * n_seq);
  double decode_tokens = static_cast<double>(steps * n_seq);
  return {{"prompt_tokens", prompt},
          {"decode_steps", steps},
          {"warmup_steps", warmup},
          {"batch", n_seq},
          {"threads", threads},
          {"device", device_description()},
          {"prefill_s", prefill_s},
          {"decode_s", decode_s},
          {"prefill_cpu_s", prefill_cpu_s},
          {"decode_cpu_s", decode_cpu_s},
          {"prefill_tok_s", prefill_s > 0 ? prefill_tokens / prefill_s : 0.0},
          {"decode_tok_s", decode_s > 0 ? decode_tokens / decode_s : 0.0},
          {"decode_ms_per_step", steps > 0 ? 1000.0 * decode_s / static_cast<double>(steps) : 0.0}};
}

nlohmann::json cmd_regguf(const Args& args) {
  std::string in = args.need("gguf"), out = args.need("out");
  ggml_context* data = nullptr;
  gguf_init_params params{/*no_alloc=*/false, /*ctx=*/&data};
  gguf_context* ctx = gguf_init_from_file(in.c_str(), params);
  if (!ctx) throw std::runtime_error("ggml's GGUF parser rejected '" + in + "'");
  // A fresh context fed from the parsed one (metadata copied, tensors added from the loaded ggml
  // tensors), as ggml's own tools build files.
  gguf_context* copy = gguf_init_empty();
  gguf_set_kv(copy, ctx);
  for (int64_t i = 0; i < gguf_get_n_tensors(ctx); ++i)
    gguf_add_tensor(copy, ggml_get_tensor(data, gguf_get_tensor_name(ctx, i)));
  bool ok = gguf_write_to_file(copy, out.c_str(), /*only_meta=*/false);
  gguf_free(copy);
  nlohmann::json result = {{"version", gguf_get_version(ctx)},
                           {"n_kv", gguf_get_n_kv(ctx)},
                           {"n_tensors", gguf_get_n_tensors(ctx)},
                           {"alignment", gguf_get_alignment(ctx)},
                           {"out", out}};
  gguf_free(ctx);
  if (data) ggml_free(data);
  if (!ok) throw std::runtime_error("ggml could not write '" + out + "'");
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args args = parse_args(argc, argv);
    g_verbose = args.flag("verbose");
    init_backends(args);
    nlohmann::json result;
    if (args.command == "info") {
      result = cmd_info(args);
    } else if (args.command == "logits") {
      result = cmd_logits(args);
    } else if (args.command == "bench") {
      result = cmd_bench(args);
    } else if (args.command == "regguf") {
      result = cmd_regguf(args);
    } else {
      throw std::runtime_error("unknown command '" + args.command +
                               "' (info, logits, bench, regguf)");
    }
    std::printf("%s\n", result.dump().c_str());
    llama_backend_free();
    return 0;
  } catch (const std::exception& e) {
    std::printf("%s\n", nlohmann::json({{"error", e.what()}}).dump().c_str());
    std::fprintf(stderr, "stoa-llama-oracle: %s\n", e.what());
    return 1;
  }
}
