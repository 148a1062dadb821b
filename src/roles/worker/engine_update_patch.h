// The engine's weights read and written as PULSE's int8 state, so that they can be a worker's
// one resident copy (weight_sync_engine.h): every tensor read back in PULSE's canonical form (the
// row-major Q8_0 grid with its f16 scales, bf16 bits, f32 bits) — whence hashes bit-identical to
// pulse::Int8State's — and verified patches scattered into whichever layout the engine holds
// (packed VNNI panels or the row-major grid) all or nothing, with an undo log of the values they
// overwrite instead of copies of the tensors.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "engine/engine_weights.h"
#include "pulse/int8_state.h"
#include "pulse/patch.h"

namespace stoa::worker {

// Every tensor the engine holds with the kind and shape PULSE gives it (the precision plan), in
// name order. kInvalidArgument for a tensor the engine holds in f32 but PULSE on the int8 grid
// (an engine not built from PULSE state cannot be a worker's copy).
std::vector<pulse::TensorLayout> engine_layouts(const engine::EngineWeights& weights);

// Tensor `layout.name` as PULSE holds it, read out of the engine (one tensor's copy).
pulse::StateTensor read_state_tensor(const engine::EngineWeights& weights,
                                     const pulse::TensorLayout& layout);

// Writes a tensor patch's new values over `tensor` (rescaled groups first, then the points), as
// pulse::apply_patch does, without an undo log: `tensor` is a scratch copy.
void overlay_patch(pulse::StateTensor& tensor, const pulse::TensorPatch& patch);

// Tensor `layout.name`'s hash (StateTensor::compute_hash, bit for bit) as it will be once
// `patches` — each a patch of this tensor, in order — are written over the engine's values,
// without writing them: int8 tensors are read in chunks of rows (no copy of the tensor, one
// ~256 KB buffer and the tensor's f16 scales), the small bf16/f32 ones copied.
Hash128 hash_patched_tensor(const engine::EngineWeights& weights, const pulse::TensorLayout& layout,
                            std::span<const pulse::TensorPatch* const> patches);

// The patch of tensor `name` inside `patch` (sorted by name), or nullptr.
const pulse::TensorPatch* find_tensor_patch(const pulse::Patch& patch, const std::string& name);

// Every tensor of the engine as an Int8State (tests and the resume path; a full copy).
pulse::Int8State read_state(const engine::EngineWeights& weights, const Hash128& config_hash,
                            uint64_t version);

// Writes verified patches into the engine in place, in order. All or nothing: every old value
// goes to an undo log before it is overwritten (the log is allocated before a tensor's first
// write), and on any failure — a tensor the engine lacks or holds in another kind, bad_alloc —
// every byte written is restored and the error rethrown.
void scatter_patches(engine::EngineWeights& weights, std::span<const pulse::Patch> patches);

// One verified anchor tensor written over the engine's (same name, kind and shape; checked).
void write_state_tensor(engine::EngineWeights& weights, const std::string& name,
                        pulse::StateTensor tensor);
// A verified anchor tensor added to engine weights being built (EngineWeights::begin_state).
void add_state_tensor(engine::EngineWeights& weights, const std::string& name,
                      pulse::StateTensor tensor);

}  // namespace stoa::worker
