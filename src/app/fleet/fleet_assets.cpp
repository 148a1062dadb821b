#include "app/fleet/fleet_assets.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/fleet/fleet_process.h"
#include "core/error.h"
#include "core/log.h"
#include "model/presets.h"

namespace stoa::app::fleet {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

// The bench's own model (not a preset, so that it does not change when a preset is retuned):
// LFM2, 6 layers (3 conv, 3 attention), hidden 256, vocab 4096, ~4.8M parameters. Its full
// int8 view is ~5 MB: about 0.8 s at 50 Mbit/s, visible beside a trainer step, while a trainer
// step and two workers still fit on two shared cores.
constexpr const char* kFleetModelConfig = R"({
  "architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2",
  "block_auto_adjust_ff_dim": false, "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 256,
  "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
  "conv_L_cache": 3, "conv_bias": false,
  "hidden_size": 256, "intermediate_size": 512, "initializer_range": 0.02,
  "layer_types": ["conv", "full_attention", "conv", "full_attention", "conv", "full_attention"],
  "max_position_embeddings": 4096, "norm_eps": 1e-05,
  "num_attention_heads": 8, "num_hidden_layers": 6, "num_key_value_heads": 4,
  "rope_theta": 1000000.0, "tie_word_embeddings": true, "torch_dtype": "float32",
  "use_cache": true, "vocab_size": 4096
})";

}  // namespace

Assets prepare_assets(const FleetBenchOptions& o, const std::string& exe, const std::string& dir,
                      const std::atomic<bool>& interrupted) {
  Assets a;
  a.data = fs::absolute(dir + "/data").string();
  a.index = a.data + "/index";
  a.model = fs::absolute(dir + "/model").string();
  auto step = [&](const std::string& what, std::vector<std::string> args) {
    // Thrown so that unwinding stops every child and removes the namespaces on the way out.
    STOA_CHECK(!interrupted, ErrorKind::kIo,
               "bench fleet: interrupted by a signal; children stopped, links removed");
    log_info("bench", "assets: ", what);
    Child c;
    c.start(exe, {std::move(args), dir + "/" + what + ".log", ""});
    c.wait_ok(600s, what, &interrupted);
  };
  fs::create_directories(dir);
  if (!fs::exists(a.data + "/train.jsonl"))
    step("data", {"data", "generate", "--out", a.data, "--seed", "1"});
  if (!fs::exists(a.index))
    step("index", {"search", "index", "--corpus", a.data + "/corpus.jsonl", "--out", a.index});
  if (!fs::exists(a.model + "/config.json")) {
    // The tokenizer first, its size the model's vocabulary; `model init --tokenizer` then copies
    // it in and writes its ids (EOS: the chat template's <|im_end|>) into config.json.
    const int64_t vocab = o.preset.empty()
                              ? json::parse(kFleetModelConfig).at("vocab_size").get<int64_t>()
                              : preset_config(o.preset).vocab_size;
    step("tokenizer", {"tokenizer", "train", "--corpus", a.data + "/corpus.jsonl", "--vocab-size",
                       std::to_string(vocab), "--out", dir + "/tokenizer"});
    std::vector<std::string> init = {"model",  "init", "--out",       a.model,
                                     "--seed", "1",    "--tokenizer", dir + "/tokenizer"};
    if (o.preset.empty()) {
      std::ofstream(dir + "/fleet-config.json") << kFleetModelConfig;
      init.insert(init.end(), {"--config", dir + "/fleet-config.json"});
    } else {
      init.insert(init.end(), {"--preset", o.preset});
    }
    step("model", init);
  }
  // Parameter count from the safetensors header (8-byte length, then JSON with every shape).
  std::ifstream st(a.model + "/model.safetensors", std::ios::binary);
  uint64_t header_len = 0;
  st.read(reinterpret_cast<char*>(&header_len), 8);
  if (st && header_len < (64u << 20)) {
    std::string header(header_len, '\0');
    st.read(header.data(), static_cast<std::streamsize>(header_len));
    const json tensors = json::parse(header);  // named: items() would outlive a temporary
    for (const auto& [name, t] : tensors.items()) {
      if (name == "__metadata__") continue;
      int64_t n = 1;
      for (const auto& d : t.at("shape")) n *= d.get<int64_t>();
      a.params += n;
    }
  }
  return a;
}

}  // namespace stoa::app::fleet
