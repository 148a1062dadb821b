#include "train/train_bench.h"

#include <chrono>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "model/arch_registry.h"
#include "model/presets.h"
#include "train/policy_model.h"
#include "train/thread_ranks.h"
#include "train/trainer.h"
#include "train/trainer_impl.h"

namespace stoa::train {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// FLOPs of one training step as counted for MFU: 6 per parameter-token for every matmul weight
// (the LM head only at trained positions; embeddings are look-ups), plus the attention products
// QKᵀ and PV over the full T×T matrices as computed (2 matmuls · 2 FLOPs · 3 for fwd+bwd).
double step_flops(const ModelConfig& c, int64_t tokens, int64_t trained, int64_t seq_len) {
  const double head = static_cast<double>(c.vocab_size) * static_cast<double>(c.hidden_size);
  double body = static_cast<double>(count_active_parameters(c)) - head;  // embedding/head
  if (!c.tie_word_embeddings) body -= head;
  double attention_layers = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) attention_layers += c.is_attention_layer(l);
  const double attn = 12.0 * attention_layers * static_cast<double>(seq_len) *
                      static_cast<double>(c.num_heads * c.head_dim);
  return 6.0 * body * tokens + 6.0 * head * trained + attn * tokens;
}

}  // namespace

ModelConfig train_bench_config(const std::string& arch, const std::string& size) {
  const ArchInfo* info = find_arch(arch);
  STOA_CHECK(info != nullptr, ErrorKind::kInvalidArgument, "unknown architecture '", arch,
             "' (qwen3, lfm2, lfm2_moe)");
  STOA_CHECK(size == "10m" || size == "100m", ErrorKind::kInvalidArgument, "unknown bench size '",
             size, "' (10m, 100m)");
  const bool big = size == "100m";
  const Arch a = info->arch;
  const int64_t vocab = big ? 32768 : 8192, hidden = big ? 768 : 256, ffn = big ? 2048 : 768;
  const int64_t layers = big ? 12 : 8, heads = big ? 12 : 8, kv_heads = 4;
  ModelConfig c =
      a == Arch::kQwen3
          ? qwen3_config(vocab, hidden, ffn, layers, heads, kv_heads, hidden / heads, true)
          : lfm2_config(vocab, hidden, ffn, layers, heads, kv_heads,
                        big ? std::vector<int64_t>{2, 5, 8, 10} : std::vector<int64_t>{2, 5, 7});
  if (a == Arch::kLfm2Moe) c = lfm2_moe_config(std::move(c), 8, 2, 2, big ? 512 : 256);
  validate_model_config(c, cat("bench config ", arch, "-", size));
  return c;
}

double measure_matmul_gflops(const std::string& device, DType dtype, int64_t n, int threads) {
  if (threads > 0) torch::set_num_threads(threads);
  torch::Device dev = parse_device(device);
  auto opts = torch::TensorOptions().dtype(torch_dtype(dtype)).device(dev);
  torch::manual_seed(0);
  torch::Tensor a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts);
  torch::Tensor c = torch::mm(a, b);  // warm-up (thread pool, BLAS buffers)
  c.sum().item<float>();
  double best = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    const double start = now_seconds();
    c = torch::mm(a, b);
    c.sum().item<float>();  // waits for an asynchronous device
    const double seconds = now_seconds() - start;
    best = std::max(best, 2.0 * static_cast<double>(n) * n * n / seconds / 1e9);
  }
  return best;
}

namespace {

template <typename MakeBatch>
double time_steps_after_warmup(int steps, Trainer& trainer, MakeBatch& make_batch) {
  double seconds = 0.0;
  for (int i = 0; i < steps; ++i) {
    auto batch = make_batch();
    const double start = now_seconds();
    trainer.train_step(batch);
    seconds += now_seconds() - start;
  }
  return seconds;
}

}  // namespace

TrainBenchReport run_train_bench(const TrainBenchOptions& o) {
  STOA_CHECK(o.nproc >= 1 && o.batch >= o.nproc, ErrorKind::kInvalidArgument,
             "bench train --nproc ", o.nproc, " needs --batch >= nproc (got ", o.batch,
             ") so that every rank has rollouts");
  STOA_CHECK(o.seq_len > o.prompt_tokens && o.prompt_tokens >= 1 && o.batch >= 1 && o.steps >= 1 &&
                 o.warmup >= 0,
             ErrorKind::kInvalidArgument,
             "bench train needs seq_len > prompt_tokens >= 1, batch >= 1, steps >= 1");
  TrainBenchReport report;
  report.device = o.device;
  report.compute_dtype = dtype_name(o.compute_dtype);
  report.sgemm_gflops = measure_matmul_gflops(o.device, o.compute_dtype, o.sgemm_size, o.threads);
  report.threads = torch::get_num_threads();
  log_info("bench", "matmul peak ", report.sgemm_gflops, " GFLOP/s (", report.threads, " threads, ",
           report.compute_dtype, ")");
  for (const std::string& size : o.sizes) {
    for (const std::string& arch : o.archs) {
      ModelConfig config = train_bench_config(arch, size);
      TrainOptions t;
      t.device = o.device;
      t.compute_dtype = o.compute_dtype;
      t.threads = o.threads;
      t.optimizer.lr = 1e-5;
      t.micro_batch_tokens = o.seq_len * o.batch;
      Trainer trainer(random_weights(config, 1234), t);
      Rng rng(7, 0);
      auto token = [&] {
        return static_cast<int32_t>(rng.below(static_cast<uint64_t>(config.vocab_size)));
      };
      auto logprob = [&] { return -3.0f + 2.99f * rng.uniform_float(); };  // in [-3, -0.01)
      auto make_batch = [&] {
        RolloutGroup g{"bench", {}};
        for (int64_t b = 0; b < o.batch; ++b) {
          Rollout r;
          r.id = cat("bench-", b);
          r.reward = static_cast<double>(b % 2);
          for (int64_t i = 0; i < o.seq_len; ++i) {
            r.tokens.push_back(token());
            r.trainable.push_back(i >= o.prompt_tokens);
            r.behaviour_logprobs.push_back(i >= o.prompt_tokens ? logprob() : 0.0f);
          }
          g.rollouts.push_back(std::move(r));
        }
        return std::vector<RolloutGroup>{std::move(g)};
      };
      for (int i = 0; i < o.warmup; ++i) trainer.train_step(make_batch());
      const double seconds = time_steps_after_warmup(o.steps, trainer, make_batch);
      double seconds_ranks = 0.0;
      CommunicatorStats comm;
      if (o.nproc > 1) {
        rng = Rng(7, 0);  // the same batches as the one-rank run
        run_thread_ranks(o.nproc, [&](std::shared_ptr<Communicator> ranks) {
          Trainer parallel(random_weights(config, 1234), t, ranks);
          for (int i = 0; i < o.warmup; ++i) parallel.train_step(make_batch());
          const CommunicatorStats before = ranks->stats();
          seconds_ranks = time_steps_after_warmup(o.steps, parallel, make_batch);
          comm = ranks->stats();
          comm.all_reduce_seconds -= before.all_reduce_seconds;
          comm.broadcast_seconds -= before.broadcast_seconds;
        });
      }
      TrainBenchResult r;
      r.arch = arch;
      r.size = size;
      r.params = count_parameters(config);
      r.active_params = count_active_parameters(config);
      r.seq_len = o.seq_len;
      r.batch = o.batch;
      r.step_seconds = seconds / o.steps;
      const int64_t tokens = o.seq_len * o.batch;
      const int64_t trained = (o.seq_len - o.prompt_tokens) * o.batch;
      r.tokens_per_second = static_cast<double>(tokens) / r.step_seconds;
      r.model_gflops = step_flops(config, tokens, trained, o.seq_len) / r.step_seconds / 1e9;
      r.mfu = report.sgemm_gflops > 0 ? r.model_gflops / report.sgemm_gflops : 0.0;
      if (o.nproc > 1) {
        r.nproc = o.nproc;
        r.tokens_per_second_ranks = static_cast<double>(tokens) * o.steps / seconds_ranks;
        r.scaling_efficiency = r.tokens_per_second_ranks / (o.nproc * r.tokens_per_second);
        r.all_reduce_seconds_per_step = comm.all_reduce_seconds / o.steps;
        r.broadcast_seconds_per_step = comm.broadcast_seconds / o.steps;
        log_info("bench", arch, "-", size, " on ", o.nproc, " ranks: ", r.tokens_per_second_ranks,
                 " tokens/s, scaling efficiency ", r.scaling_efficiency, ", all-reduce ",
                 r.all_reduce_seconds_per_step, " s/step");
      }
      log_info("bench", arch, "-", size, " (", r.params, " params): ", r.tokens_per_second,
               " tokens/s, ", r.model_gflops, " GFLOP/s, MFU ", r.mfu);
      report.results.push_back(r);
    }
  }
  return report;
}

std::string train_bench_json(const TrainBenchReport& report) {
  nlohmann::json j = {{"bench", "train"},
                      {"device", report.device},
                      {"compute_dtype", report.compute_dtype},
                      {"threads", report.threads},
                      {"sgemm_gflops", report.sgemm_gflops},
                      {"results", nlohmann::json::array()}};
  for (const TrainBenchResult& r : report.results) {
    j["results"].push_back({{"arch", r.arch},
                            {"size", r.size},
                            {"params", r.params},
                            {"active_params", r.active_params},
                            {"seq_len", r.seq_len},
                            {"batch", r.batch},
                            {"step_seconds", r.step_seconds},
                            {"tokens_per_second", r.tokens_per_second},
                            {"model_gflops", r.model_gflops},
                            {"mfu", r.mfu}});
    if (r.nproc > 1) {
      nlohmann::json& last = j["results"].back();
      last["nproc"] = r.nproc;
      last["tokens_per_second_ranks"] = r.tokens_per_second_ranks;
      last["scaling_efficiency"] = r.scaling_efficiency;
      last["all_reduce_seconds_per_step"] = r.all_reduce_seconds_per_step;
      last["broadcast_seconds_per_step"] = r.broadcast_seconds_per_step;
    }
  }
  return j.dump(2);
}

}  // namespace stoa::train
