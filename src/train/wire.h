// The data-parallel command channel's payloads (torch-free): what rank 0 broadcasts so that
// every rank runs the same step — a batch of rollout groups, an SFT batch, the trainer options.
// CBOR: floats and ids round-trip exactly, so every rank sees bit-identical inputs.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/rollout.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace stoa::train {

std::string encode_groups(const std::vector<RolloutGroup>& groups);
std::vector<RolloutGroup> decode_groups(const std::string& bytes);

std::string encode_sft_batch(const std::vector<SftExample>& batch);
std::vector<SftExample> decode_sft_batch(const std::string& bytes);

nlohmann::json train_options_to_json(const TrainOptions& options);
TrainOptions train_options_from_json(const nlohmann::json& json);

}  // namespace stoa::train
