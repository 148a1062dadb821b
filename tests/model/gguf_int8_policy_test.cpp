// The Q8_0 export and the engine must agree on which tensors live on the int8 grid: a tensor the
// exporter writes as Q8_0 but the engine keeps in f32 (or the reverse) would make the llama.cpp
// oracle compare different weights. Checked for every preset, tiny to real-sized shapes.
#include <gtest/gtest.h>

#include "engine/engine_weights.h"
#include "model/gguf_arch_map.h"
#include "model/presets.h"
#include "model/weights.h"

namespace stoa {
namespace {

TEST(GgufInt8Policy, ExportAndEngineAgreeForEveryPreset) {
  for (const PresetInfo& preset : model_presets()) {
    ModelConfig c = preset_config(preset.name);
    size_t checked = 0;
    for (const GgufTensorPlan& p : gguf_tensor_plan(c)) {
      for (size_t s = 0; s < p.sources.size(); ++s) {
        const Shape& shape = p.source_shapes[s];
        bool exported_q8 = p.matrix && shape.back() % kInt8GroupSize == 0;
        EXPECT_EQ(exported_q8, engine::int8_eligible(p.sources[s], shape))
            << preset.name << ": " << p.sources[s] << " -> " << p.gguf_name;
        ++checked;
      }
    }
    EXPECT_EQ(checked, expected_tensors(c).size()) << preset.name;
  }
}

}  // namespace
}  // namespace stoa
