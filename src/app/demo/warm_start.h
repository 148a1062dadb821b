// A warm start: the SFT model an earlier `stoa demo --full` produced, reused by the default demo so
// that its 20 minutes go to reinforcement learning (the copy behaviour the SFT has to teach first
// takes ~30 minutes of SFT on this machine: docs/results.md §0b). The directory is an ordinary
// model directory (config.json, model.safetensors, tokenizer.json, tokenizer_config.json) plus
// provenance.json: the demo's stage parameters that produced it and the SFT's held-out curve.
//
// A warm start only fits a demo whose data and tokenizer are the ones it was trained on: the same
// data/index/tokenizer stage parameters and a tokenizer.json identical byte for byte to the one
// this demo trained (which also catches a change in the data generator or the BPE trainer).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace stoa::app {

struct WarmStart {
  std::string dir;
  nlohmann::json provenance;  // {"stages": {...}, "sft_probe": {...}}
};

// Reads `dir`; throws stoa::Error (kNotFound / kBadFormat) naming the missing or malformed file.
WarmStart read_warm_start(const std::string& dir);

// Why `warm` cannot start a demo whose setup stages so far ran with `stage_chain` (the demo's
// stamp chain: "data", "index", "tokenizer", ...) and trained `tokenizer_json`; empty if it can.
std::string warm_start_mismatch(const WarmStart& warm, const nlohmann::json& stage_chain,
                                const std::string& tokenizer_json);

// Writes `<model_dir>/provenance.json` for a model the demo's SFT produced.
void write_provenance(const std::string& model_dir, const nlohmann::json& stage_chain,
                      const nlohmann::json& sft_probe);

// Copies the model files of `warm` into `model_dir` (created; existing files replaced).
void install_warm_start(const WarmStart& warm, const std::string& model_dir);

}  // namespace stoa::app
