// INTERNAL (includes libtorch). The state behind Trainer's pimpl, shared by trainer.cpp (steps)
// and checkpoint.cpp (save/resume).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/rng.h"
#include "train/policy_model.h"
#include "train/trainer.h"

namespace stoa::train {

torch::Device parse_device(const std::string& name);  // throws for unknown or absent devices

struct Trainer::Impl {
  Impl(const ModelWeights& initial, const TrainOptions& options);

  torch::optim::AdamWOptions adamw_options() const;
  void clear_grads();
  void apply_gradients(StepMetrics* metrics, const std::string& batch_name);

  TrainOptions options;
  torch::Device device;
  std::unique_ptr<PolicyModel> model;
  std::vector<torch::Tensor> trainable;  // the optimiser's parameters, in model order
  std::unique_ptr<torch::optim::AdamW> optimizer;
  int64_t step = 0;
  int64_t max_tokens = 0;
  Rng rng;  // data order (Trainer::next_random); saved in checkpoints
};

}  // namespace stoa::train
