// The receiver's weights: the trainer's int8 view of a model. Which carrier a tensor travels in is
// the shared precision plan's choice (model/precision_plan.h, carrier_for): the big 2-D matrices
// are Int8Matrix on the GGUF Q8_0 grid (f16 scale per 32 values); the MoE router and expert_bias
// travel in f32, because expert choice is a discontinuous top-k that a rounded router would flip
// versus the trainer; every other tensor (norms, conv kernels, biases) is bf16 — a worker computes
// with bf16-or-wider norms anyway, and bf16 keeps those tensors as sparse under small updates as
// the int8 ones (an f32 copy would change in nearly every element at every step).
//
// The state caches the xxh3-128 of every tensor so that applying a patch rehashes only the
// tensors it touches; mutation therefore goes only through this class (and the patch applier).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/hash.h"
#include "core/int8_grid.h"
#include "core/tensor.h"

namespace stoa::pulse {

// The wire values of the kinds (docs/pulse-format.md); kF32 arrived with format version 2.
enum class TensorKind : uint8_t { kInt8 = 0, kBf16 = 1, kF32 = 2 };
const char* tensor_kind_name(TensorKind kind);
// The kind the precision plan gives tensor `name` of shape `shape`.
TensorKind tensor_kind_for(const std::string& name, const Shape& shape);

struct StateTensor {
  TensorKind kind = TensorKind::kInt8;
  Shape shape;
  Int8Matrix q;                // kInt8: rows = shape[0], cols = shape[1]
  std::vector<uint16_t> bf16;  // kBf16: numel() values, bf16 bits
  // kF32: numel() values as f32 BITS, so that equality, diffing and hashing are bitwise (a float
  // compare would call -0 == +0 and miss a change the hash sees). Copy out with memcpy.
  std::vector<uint32_t> f32;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const {
    return kind == TensorKind::kInt8   ? q.nbytes()
           : kind == TensorKind::kBf16 ? bf16.size() * 2
                                       : f32.size() * 4;
  }
  int64_t groups() const {
    return kind == TensorKind::kInt8 ? static_cast<int64_t>(q.scales.size()) : 0;
  }
  // The tensor's content hash (see docs/pulse-format.md, "Hashes"): a StateHasher fed
  // ("values", I8 [rows, cols]) then ("scales", F16 [rows, cols/32]); or ("values", BF16 shape);
  // or ("values", F32 shape).
  Hash128 compute_hash() const;
};

class Int8State {
 public:
  Int8State() = default;

  // Adds a tensor; names must be unique. Throws kInvalidArgument on a malformed tensor.
  void add_int8(const std::string& name, Int8Matrix q);
  void add_bf16(const std::string& name, Shape shape, std::vector<uint16_t> values);
  void add_f32(const std::string& name, Shape shape, std::vector<uint32_t> bits);
  void add(const std::string& name, StateTensor tensor);
  // Adds a tensor whose hash the caller has just computed (a streaming decoder that checked it):
  // spares hashing every tensor twice on an anchor load.
  void add_hashed(const std::string& name, StateTensor tensor, const Hash128& hash);

  const std::map<std::string, StateTensor>& tensors() const { return tensors_; }
  const StateTensor& at(const std::string& name) const;  // throws kNotFound naming the tensor
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  size_t size() const { return tensors_.size(); }

  uint64_t version() const { return version_; }
  void set_version(uint64_t version) { version_ = version; }
  // Identifies the model configuration (e.g. xxh3 of its config.json); part of the fingerprint.
  const Hash128& config_hash() const { return config_hash_; }
  void set_config_hash(const Hash128& hash) { config_hash_ = hash; }

  Hash128 tensor_hash(const std::string& name) const;  // cached
  // Whole-state hash: xxh3-128 over (u64 name length, name, tensor hash) in name order.
  Hash128 state_hash() const;
  // Model fingerprint: config hash + every tensor's name, kind and shape. Scales and values are
  // not part of it, so it stays fixed over a training run; a patch for another model is refused.
  Hash128 fingerprint() const;

  size_t nbytes() const;  // int8 values + f16 scales + bf16 and f32 tensors
  int64_t numel() const;
  int64_t int8_numel() const;  // values on the int8 grid

  // Recomputes every cached hash and compares: the check a worker may run on its own memory.
  bool verify_cached_hashes() const;

 private:
  friend class StateEditor;
  std::map<std::string, StateTensor> tensors_;
  std::map<std::string, Hash128> hashes_;
  uint64_t version_ = 0;
  Hash128 config_hash_;
};

// Mutable access for the patch applier (and tests that plant corruption): it can edit tensor
// storage in place and must call rehash() for every tensor it touched.
class StateEditor {
 public:
  explicit StateEditor(Int8State& state) : state_(state) {}
  StateTensor& tensor(const std::string& name);
  void set_hash(const std::string& name, const Hash128& hash) { state_.hashes_.at(name) = hash; }
  void rehash(const std::string& name);

 private:
  Int8State& state_;
};

Hash128 combine_state_hash(const std::map<std::string, Hash128>& tensor_hashes);

// What the model fingerprint covers of one tensor.
struct TensorLayout {
  std::string name;
  TensorKind kind = TensorKind::kInt8;
  Shape shape;
};
// Int8State::fingerprint from the layouts alone (in name order), for readers that never hold
// the whole state (anchor_stream.h).
Hash128 model_fingerprint(const Hash128& config_hash, const std::vector<TensorLayout>& tensors);

}  // namespace stoa::pulse
