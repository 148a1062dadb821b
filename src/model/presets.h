// Named model configs: tiny ones for tests and the llama.cpp oracle, bench-sized ones, the CPU
// demo model, and real shapes (LFM2-350M, LFM2-8B-A1B, Qwen3-0.6B) for reference and size math.
// Every hidden and FFN width is a multiple of 32, the int8 grid's group size.
#pragma once
#include <string>
#include <vector>

#include "model/config.h"

namespace stoa {

struct PresetInfo {
  std::string name;
  std::string description;
};

const std::vector<PresetInfo>& model_presets();
// Throws kNotFound naming the preset and listing the known ones.
ModelConfig preset_config(const std::string& name);

}  // namespace stoa
