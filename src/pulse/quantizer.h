// The sender side of the int8 view: quantises the trainer's f32 master weights onto a grid whose
// per-group scales are frozen, so that a small update changes only the few values that cross a
// rounding boundary (a changed scale would rewrite its whole group).
//
// Grid lifetime: the first quantize() chooses fresh Q8_0 scales (scale = f16(amax / 127)) for
// every group; afterwards every group keeps its scale until the rescale rule fires for it. Anchors
// are checkpoints of the view, NOT regrids: re-choosing every scale at each anchor would make the
// patch into an anchor version as large as the full state for every worker.
//
// Rescale rule (docs/pulse-format.md, "Rescale rule"): with frozen scale s and fresh scale s',
//   rescale iff  round(amax / s) > 127   (a value would clip: the grid no longer covers the group)
//            or  s' < shrink_below * s   (the group's range shrank; default 1/2 = a whole bit lost)
// A rescaled group takes s' and is re-quantised on it; the patch carries it whole.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "pulse/int8_state.h"

namespace stoa::pulse {

// Master weights by name; f32 (other float dtypes are converted). Non-owning.
using WeightViews = std::map<std::string, TensorView>;

// Which tensors go on the int8 grid: the precision plan's kInt8Grid (2-D, cols % 32 == 0, and not
// the MoE router). The other tensors travel as tensor_kind_for() says (f32 or bf16).
bool is_int8_tensor(const std::string& name, const Shape& shape);

struct RescaleRule {
  float shrink_below = 0.5f;  // rescale when the fresh scale < shrink_below * the frozen scale
};

// True when a group with maximum magnitude `amax`, frozen scale `frozen` and fresh scale `fresh`
// (both f16 bits) must be re-scaled.
bool should_rescale(float amax, uint16_t frozen, uint16_t fresh, const RescaleRule& rule);

// A group's largest magnitude, NaN when any of its kInt8GroupSize values is not finite.
float group_amax(const float* group);

// Bit-identical to core's int8_quantize_group for finite inputs (tested), but vectorisable: the
// quantiser runs over every weight at every version, so it dominates the encode time.
void quantize_group_exact(const float* group, uint16_t scale_bits, int8_t* out);

struct QuantizeStats {
  int64_t groups = 0;
  int64_t rescaled_clip = 0;    // groups re-scaled because a value would clip
  int64_t rescaled_shrink = 0;  // groups re-scaled because their range shrank
};

class Int8Quantizer {
 public:
  explicit Int8Quantizer(RescaleRule rule = {}, ThreadPool* pool = nullptr)
      : rule_(rule), pool_(pool) {}

  // Quantises the weights into a state at `version`, each tensor in the carrier the precision
  // plan gives it (int8 grid, f32 bits, or bf16). Without a grid yet, chooses fresh scales
  // (and freezes them); with one, reuses the frozen scales and applies the rescale rule.
  // Throws kInvalidArgument for a non-finite weight or a tensor set that does not match the grid.
  Int8State quantize(const WeightViews& weights, uint64_t version, QuantizeStats* stats = nullptr);

  bool has_grid() const { return !scales_.empty(); }
  void reset_grid() { scales_.clear(); }
  // Continues from an existing view (e.g. the trainer resumes from an anchor).
  void adopt_grid(const Int8State& state);

  void set_config_hash(const Hash128& hash) { config_hash_ = hash; }
  const RescaleRule& rule() const { return rule_; }

 private:
  RescaleRule rule_;
  ThreadPool* pool_;
  Hash128 config_hash_;
  std::map<std::string, std::vector<uint16_t>> scales_;
};

}  // namespace stoa::pulse
