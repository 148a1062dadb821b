// How each architecture maps onto llama.cpp's GGUF conventions: the architecture name, the
// metadata keys (`<arch>.embedding_length`, ...) and the tensor names (`blk.N.attn_q.weight`,
// merged `blk.N.ffn_{gate,up,down}_exps.weight` for MoE experts). Used by the writer (export) and
// the reader (import back to ModelWeights), so the two directions cannot drift apart. The names
// (llama.cpp's architecture name, each tensor's GGUF name) come from the architectures' registry
// entries and tensor-role tables; this file holds the conventions common to all of them.
//
// Facts taken from llama.cpp's src/llama-arch.cpp and src/models/{qwen3,lfm2,lfm2moe}.cpp:
//  - LFM2's final norm is `token_embd_norm.weight` (llama.cpp's own historical name for it);
//  - LFM2 marks conv layers with head_count_kv = 0 in a per-layer array;
//  - LFM2's conv kernel [H, 1, L] is stored squeezed as ggml ne = {L, H};
//  - LFM2-MoE: gating func 2 = sigmoid, expert bias `exp_probs_b.bias`, the first
//    `leading_dense_block_count` layers are dense, and llama.cpp always normalises the top-k
//    weights and reads no weight scale for lfm2moe.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "model/gguf_format.h"

namespace stoa {

struct GgufTensorPlan {
  std::string gguf_name;             // e.g. "blk.3.ffn_up_exps.weight"
  Shape shape;                       // our order (outermost first); ggml ne is the reverse
  std::vector<std::string> sources;  // HF names; several = stacked on a new leading axis
  std::vector<Shape> source_shapes;  // shape of each source in ModelWeights
  bool matrix = false;               // exported as F16/Q8_0 when asked; false = always F32
};

const char* gguf_arch_name(Arch arch);  // ArchInfo::gguf_name: "qwen3", "lfm2", "lfm2moe"

// Every GGUF tensor of `config`, in expected_tensors() order (experts merged at their first
// member). Fails with kUnsupported naming an HF tensor that has no llama.cpp counterpart.
std::vector<GgufTensorPlan> gguf_tensor_plan(const ModelConfig& config);

// The metadata llama.cpp reads for `config` (architecture keys + a "none" tokenizer sized to the
// vocabulary, so llama.cpp accepts the file and token ids are fed directly). Fails with
// kUnsupported for settings llama.cpp cannot represent.
std::vector<std::pair<std::string, gguf::Value>> gguf_metadata(const ModelConfig& config);

// The inverse: rebuilds a ModelConfig from GGUF metadata (`has_output` = an `output.weight`
// tensor exists, i.e. embeddings are untied). `source` names the file in errors.
ModelConfig config_from_gguf(const std::map<std::string, gguf::Value>& kv, bool has_output,
                             const std::string& source);

}  // namespace stoa
