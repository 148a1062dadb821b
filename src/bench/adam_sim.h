// Simulated AdamW training for the PULSE tests and the torch-free bench: f32 master weights of a
// Qwen3-shaped model initialised N(0, std) (norms at 1), and AdamW steps driven by synthetic
// gradients (a persistent per-element component plus fresh noise each step, so that, as in real
// fine-tuning, Adam's normalised step is ~lr in magnitude with a partly consistent sign).
// Deterministic: the same seed gives the same bits on every machine.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "pulse/quantizer.h"

namespace stoa::pulse {

struct SimLayout {
  int64_t vocab = 32000;
  int64_t hidden = 768;
  int64_t intermediate = 2048;
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t kv_heads = 4;
  int64_t head_dim = 64;
};
// ~100M parameters (the bench's size); tiny() is for unit tests.
SimLayout sim_layout_100m();
SimLayout sim_layout_tiny();

struct AdamSimOptions {
  float init_std = 0.02f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  float grad_noise = 1.0f;  // fresh noise relative to the persistent gradient component
};

class AdamSimulator {
 public:
  AdamSimulator(const SimLayout& layout, uint64_t seed, AdamSimOptions options = {});
  void step(float lr);  // one AdamW step on every tensor
  void reset();         // back to the initial weights and a fresh optimiser
  int64_t steps() const { return step_; }
  WeightViews views() const;  // f32 views of the current master weights
  int64_t numel() const;

 private:
  struct Param {
    std::string name;
    Tensor w, m, v;
    bool is_norm = false;
  };
  void init();
  SimLayout layout_;
  uint64_t seed_;
  AdamSimOptions options_;
  std::vector<Param> params_;
  int64_t step_ = 0;
};

}  // namespace stoa::pulse
