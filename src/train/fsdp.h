// INTERNAL (includes libtorch). The fully sharded policy (ZeRO-3 / FSDP style,
// docs/design/distributed-trainer.md): this rank keeps 1/N of every unit's f32 masters and
// gradient (fsdp_layout.h), gathers a unit's parameters for its forward and again for its
// backward, and frees them after; the gradients are reduce-scattered unit by unit during the
// backward. A block's activations are not kept: its input is, and the block is recomputed in the
// backward (activation checkpointing per block), so what a rank holds beyond its shards is one
// gathered unit, one block's activations and one block input per layer.
//
// Every public call is collective: all ranks make the same calls in the same order (a rank with
// no micro-batch left passes nullptr to forward_backward and only takes part).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/tensor_source.h"
#include "train/communicator.h"
#include "train/fsdp_layout.h"
#include "train/policy_math.h"

namespace stoa::train {

class ShardedPolicy {
 public:
  // `ranks` null: one rank (the same code path; gathers are views of the shard).
  ShardedPolicy(const ModelConfig& config, torch::Device device, torch::ScalarType compute,
                Communicator* ranks);

  const ModelConfig& config() const { return math_.config(); }
  const FsdpLayout& layout() const { return layout_; }
  int rank() const { return rank_; }

  // Collective: rank 0 reads `source` one tensor at a time (null on the other ranks) and every
  // rank keeps its slice of each unit; no rank ever holds more than one unit's flat buffer.
  void load(const TensorSource* source);

  // A piece: the part of one member (a tensor's rows) inside this rank's slice of a unit. The
  // pieces are views of the shard, and they are what AdamW updates: per tensor, so a tensor no
  // token reached (an MoE expert) keeps no gradient and AdamW leaves it alone, as in one process.
  struct Piece {
    size_t unit = 0, member = 0;
    int64_t begin = 0, end = 0;  // in the unit's flat buffer
    torch::Tensor values;        // view of the unit's shard
  };
  const std::vector<Piece>& pieces() const { return pieces_; }
  std::vector<torch::Tensor> trainable() const;  // the pieces of trainable members
  // The rank's shard of unit u ([slice end − slice begin] elements; the padding is not stored).
  const torch::Tensor& master(size_t unit) const { return master_[unit]; }

  struct MicroBatch {
    torch::Tensor tokens;     // [B, T] int64
    torch::Tensor positions;  // [N] into B·T: the positions whose logits the loss reads
    // The loss of the [N, V] f32 logits (it records its own metrics); differentiated here.
    std::function<torch::Tensor(const torch::Tensor&)> loss_of;
  };
  // Forward and backward of one micro-batch; gradients accumulate into the shards.
  void forward_backward(const MicroBatch* batch);
  void zero_grads();
  void attach_grads();  // each trainable piece's .grad: its gradient, or none if it got none

  // Forward only: the [B, T, V] f32 logits (every rank computes them; rank 0 uses them).
  torch::Tensor logits(const torch::Tensor& tokens);
  // The whole tensor `spec` (index into layout().specs), gathered; a view while it lives in one
  // unit. Tensors are asked in name order by every rank (the export's order).
  torch::Tensor gather_tensor(size_t spec);
  // The same into `out` (spec's shape, f32, host): one copy however many units hold the tensor.
  // `out` null: only take part in the gathers (the ranks that do not export).
  void gather_tensor_into(size_t spec, float* out);
  // Every tensor in name order (collective); `take` runs on every rank that passes one (null:
  // only take part).
  void gather_all(const std::function<void(const std::string&, const torch::Tensor&)>& take);
  // Drops gather_tensor's cached unit (after an export: the next step changes the masters).
  void end_gathers();
  std::vector<size_t> specs_in_name_order() const;

 private:
  torch::Tensor gather(size_t unit);           // the unit's flat buffer (real elements first)
  const torch::Tensor& gathered(size_t unit);  // the same, kept until another unit is asked
  void look_up_rows(size_t unit, const torch::Tensor& flat, const torch::Tensor& tokens,
                    torch::Tensor* x) const;
  torch::Tensor member_view(size_t unit, size_t member, const torch::Tensor& flat) const;
  PolicyLayer bind_layer(size_t layer, const torch::Tensor& flat, bool leaves,
                         std::vector<torch::Tensor>* grads_of) const;
  // Sums the members' gradients (undefined: none) over the ranks into this rank's shard.
  void scatter_grads(size_t unit, const std::vector<torch::Tensor>& member_grads);

  FsdpLayout layout_;
  PolicyLayout names_;
  PolicyMath math_;
  Communicator* ranks_;
  int rank_ = 0;
  bool attends_ = false;
  std::vector<torch::Tensor> master_, grad_;  // per unit: this rank's slice
  std::vector<std::vector<bool>> got_grad_;   // per unit, per member: a gradient this step
  std::vector<Piece> pieces_;
  // gather_tensor's cache: the last unit gathered and its flat buffer.
  size_t cached_unit_ = SIZE_MAX;
  torch::Tensor cached_flat_;
};

}  // namespace stoa::train
