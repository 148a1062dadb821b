// The llama.cpp oracle as the oracle tests drive it: stoa-llama-oracle (STOA_LLAMA_ORACLE, built
// against the prebuilt npm llama.cpp libraries) scores token ids of a GGUF, and compare() sets
// its logits beside Stoa's engine's (max |Δlogit|, per-token KL, top-1 agreement).
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/tensor.h"
#include "model/presets.h"
#include "model/weights.h"

namespace stoa::oracle {

inline constexpr int64_t kTokens = 96;   // >= 64 positions compared
inline constexpr int64_t kPrefill = 40;  // then 56 single-token decode steps
// Wider than the default init (0.02), so the logits spread and the softmax is not near-uniform
// (a KL bar on near-uniform distributions lets real bugs through). Not much wider: llama.cpp's
// Q8_0 path rounds activations to 8 bits, and with larger activations near-tied MoE routing
// decisions flip between the two engines on some tokens (see docs/design/oracle.md).
inline constexpr float kStd = 0.05f;

inline std::filesystem::path work_dir() {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / cat("stoa_oracle_test_", ::getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string run_capture(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) fail(ErrorKind::kIo, "cannot run: ", command);
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  int status = ::pclose(pipe);
  STOA_CHECK(status == 0, ErrorKind::kInternal, "oracle failed (status ", status, "): ", command,
             "\n", out);
  return out;
}

inline float weight_std() {
  const char* env = std::getenv("STOA_ORACLE_STD");  // for exploring the bars by hand
  return env ? static_cast<float>(std::atof(env)) : kStd;
}

inline int oracle_threads() {
  const char* env = std::getenv("STOA_ORACLE_THREADS");
  return env ? std::atoi(env) : 1;  // see the harness: threads spin on a loaded machine
}

// llama.cpp's logits for every position, [tokens.size()][vocab]; with `lora`, a LoRA adapter
// GGUF set on the context at scale 1.
inline std::vector<float> llama_logits(const std::string& gguf, const std::vector<int32_t>& tokens,
                                       int64_t prefill, int64_t vocab,
                                       const std::string& lora = "") {
  std::filesystem::path dir = work_dir();
  std::filesystem::path tok = dir / "tokens.txt", out = dir / "logits.f32";
  {
    std::ofstream t(tok);
    for (int32_t id : tokens) t << id << ' ';
  }
  std::string cmd =
      cat(STOA_LLAMA_ORACLE, " logits --gguf '", gguf, "' --tokens '", tok.string(), "' --out '",
          out.string(), "' --prefill ", prefill, " --threads ", oracle_threads(),
          lora.empty() ? std::string() : cat(" --lora '", lora, "'"), " 2>&1");
  nlohmann::json summary = nlohmann::json::parse(run_capture(cmd));
  EXPECT_EQ(summary.at("n_vocab").get<int64_t>(), vocab);
  std::vector<float> logits(tokens.size() * static_cast<size_t>(vocab));
  std::ifstream in(out, std::ios::binary);
  in.read(reinterpret_cast<char*>(logits.data()), static_cast<std::streamsize>(logits.size() * 4));
  STOA_CHECK(in.gcount() == static_cast<std::streamsize>(logits.size() * 4), ErrorKind::kBadFormat,
             out.string(), ": short logits file");
  return logits;
}

// random_weights sets every norm to 1, which would hide a norm wired to the wrong place (q_norm
// read as k_norm, the final norm swapped, ...). Give each norm its own values around 1.
inline ModelWeights test_weights(const std::string& preset) {
  ModelWeights w = random_weights(preset_config(preset), 1234, weight_std());
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> jitter(0.6f, 1.4f);
  for (auto& [name, t] : w.tensors) {
    if (t.rank() != 1 || name.find("norm") == std::string::npos) continue;
    for (int64_t k = 0; k < t.numel(); ++k) t.as<float>()[k] = jitter(rng);
  }
  return w;
}

inline std::vector<int32_t> random_tokens(int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(kTokens);
  for (int32_t& t : tokens) t = pick(rng);
  return tokens;
}

inline std::vector<double> log_softmax(const float* x, int64_t n) {
  double m = x[0];
  for (int64_t k = 1; k < n; ++k) m = std::max<double>(m, x[k]);
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += std::exp(x[k] - m);
  double lse = m + std::log(s);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out[static_cast<size_t>(k)] = x[k] - lse;
  return out;
}

struct Compare {
  double max_abs_diff = 0;
  double max_abs_logit = 0;
  double mean_kl = 0;
  double max_kl = 0;
  int64_t top1_agree = 0;  // positions where both engines rank the same token first
};

inline Compare compare(const std::vector<float>& ref, const Tensor& ours, int64_t n,
                       int64_t vocab) {
  Compare c;
  const float* o = ours.as<float>();
  for (size_t k = 0; k < ref.size(); ++k) {
    c.max_abs_diff = std::max(c.max_abs_diff, std::fabs(static_cast<double>(ref[k]) - o[k]));
    c.max_abs_logit = std::max(c.max_abs_logit, std::fabs(static_cast<double>(ref[k])));
  }
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> lp = log_softmax(ref.data() + t * vocab, vocab);
    std::vector<double> lq = log_softmax(o + t * vocab, vocab);
    double kl = 0;
    for (int64_t k = 0; k < vocab; ++k)
      kl += std::exp(lp[static_cast<size_t>(k)]) *
            (lp[static_cast<size_t>(k)] - lq[static_cast<size_t>(k)]);
    c.mean_kl += kl / static_cast<double>(n);
    const float* r = ref.data() + t * vocab;
    const float* q = o + t * vocab;
    c.top1_agree += std::max_element(r, r + vocab) - r == std::max_element(q, q + vocab) - q;
    c.max_kl = std::max(c.max_kl, kl);
  }
  return c;
}

// F32 bar: max |Δlogit| <= kF32RatioBar * max |logit| (see oracle_parity_test.cpp).
inline constexpr double kF32RatioBar = 2e-6;

}  // namespace stoa::oracle
