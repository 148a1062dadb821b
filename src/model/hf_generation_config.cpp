// generation_config.json for `stoa model export-hf` (see the header for what is kept and why).
#include "model/hf_generation_config.h"

#include "core/error.h"

namespace stoa {

namespace {

// Logit processors transformers applies when these keys are set; Stoa's sampler has none of
// them, so a run's policy was never sampled through them.
constexpr const char* kFiltersTheRunDidNotUse[] = {
    "min_p",      "typical_p",          "epsilon_cutoff",
    "eta_cutoff", "repetition_penalty", "no_repeat_ngram_size"};

void set_id_if_absent(nlohmann::json& out, const char* key, int64_t id) {
  if (id >= 0 && (!out.contains(key) || out[key].is_null())) out[key] = id;
}

}  // namespace

nlohmann::json hf_generation_config(const ModelConfig& config, const nlohmann::json* base,
                                    const std::optional<HfSampling>& sampling) {
  nlohmann::json out = nlohmann::json::object();
  if (base) {
    STOA_CHECK(base->is_object(), ErrorKind::kBadFormat,
               "generation_config.json of the source model is not a JSON object");
    out = *base;
  }
  set_id_if_absent(out, "bos_token_id", config.bos_token_id);
  set_id_if_absent(out, "eos_token_id", config.eos_token_id);
  set_id_if_absent(out, "pad_token_id", config.pad_token_id);
  if (!sampling) return out;

  for (const char* key : kFiltersTheRunDidNotUse) out.erase(key);
  if (sampling->temperature == 0.0) {
    out["do_sample"] = false;
    for (const char* key : {"temperature", "top_p", "top_k"}) out.erase(key);
    return out;
  }
  out["do_sample"] = true;
  out["temperature"] = sampling->temperature;
  out["top_p"] = sampling->top_p;
  out["top_k"] = sampling->top_k;
  return out;
}

}  // namespace stoa
