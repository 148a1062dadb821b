// Precision plan: the ONE rule for which tensor travels and computes in which precision. The engine
// (int8 vs f32 linears), PULSE (int8 grid / bf16 / f32 carriers of worker state and patches) and
// the GGUF Q8_0 export all ask carrier_for(), so a worker, the llama.cpp oracle and the trainer can
// never disagree about which weights are rounded.
//
// The rule and why:
//  - kInt8Grid: 2-D weights whose column count is a multiple of the int8 group (32) — the big
//    linears and the embedding. That is where the bytes are; GGUF Q8_0 blocks need cols % 32 == 0.
//  - kF32: the MoE router (`*.feed_forward.gate.weight`, llama.cpp's `ffn_gate_inp`) and
//    `*.expert_bias` — the rows whose precision class is a routing one in the architectures'
//    tensor-role tables (tensor_roles.h); any other tensor follows the shape rule. Expert choice is
//    a discontinuous top-k: a router rounded to int8 or a bias rounded to bf16 flips choices versus
//    the trainer's f32, so the worker's behaviour policy would differ from the trainer's more than
//    it must. Both are tiny (E x H and E per MoE layer), and expert_bias never changes (the trainer
//    freezes it), so f32 costs almost nothing on the wire. llama-quantize keeps ffn_gate_inp in F32
//    for the same reason.
//  - kBf16: everything else (norms, conv kernels, biases, odd-shaped matrices). bf16 keeps small
//    optimizer updates sparse in a patch (most steps round to no change) at half the bytes of f32.
#pragma once

#include <string>

#include "core/tensor.h"

namespace stoa {

enum class Carrier : uint8_t { kInt8Grid = 0, kBf16 = 1, kF32 = 2 };

const char* carrier_name(Carrier carrier);

// True for the MoE router weight (the kRouter row of an architecture's table, e.g. lfm2_moe's
// `model.layers.N.feed_forward.gate.weight`).
bool is_moe_router(const std::string& name);

// The carrier of tensor `name` with logical shape `shape` (row-major, [rows, cols] for matrices).
Carrier carrier_for(const std::string& name, const Shape& shape);

}  // namespace stoa
