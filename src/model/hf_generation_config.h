// generation_config.json of an exported Hugging Face model directory: the token ids generation
// stops and pads with, and — when the export comes from a run — the sampling the run's rollouts
// were drawn with, so `model.generate()` samples the policy the way it was trained on-policy.
#pragma once
#include <optional>

#include <nlohmann/json.hpp>

#include "model/config.h"

namespace stoa {

// The sampling settings of a run ([sampling] of run.toml), in the sampler's meaning: temperature
// 0 is greedy, top_k 0 and top_p 1 are off.
struct HfSampling {
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
};

// `base` is the source model's own generation_config.json when it has one (kept: its eos list
// and other fields are the publisher's word, more precise than config.json's single eos id);
// bos/eos/pad ids come from `config` where the base lacks them. With `sampling`, do_sample,
// temperature, top_p and top_k are the run's, written explicitly (HF's defaults differ: top_k 50),
// and the base's other sampling filters (min_p, typical_p, repetition_penalty, ...) are removed,
// since the run sampled without them. Temperature 0 is written as greedy (do_sample false, no
// sampling keys), as HF validates it. Throws kBadFormat when `base` is not a JSON object.
nlohmann::json hf_generation_config(const ModelConfig& config, const nlohmann::json* base,
                                    const std::optional<HfSampling>& sampling);

}  // namespace stoa
