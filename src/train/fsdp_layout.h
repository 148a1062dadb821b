// The fully sharded trainer's layout, torch-free (docs/design/distributed-trainer.md, "FSDP"):
// which tensors form each unit (the parameters gathered together), where each sits in the unit's
// flat buffer, and which slice of that buffer every rank keeps. Also the basis of the per-rank
// memory plan (`stoa bench train --plan`), so the plan and the trainer count the same elements.
//
// Units: the embedding in row chunks, one unit per layer, the final norm, and (untied models) the
// LM head in row chunks. The chunks keep the largest gathered buffer near one layer's size: a
// 151,936 x 1,024 embedding gathered whole would cost a rank more than its whole shard of the
// layers. A unit's flat buffer is its members' elements one after the other, padded to a
// multiple of the world size; rank r keeps elements [r·S, (r+1)·S) with S = padded / world.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace stoa::train {

// Rows [row_begin, row_end) of one tensor (all of it for everything but the chunked tables).
struct FsdpMember {
  size_t tensor = 0;  // index into FsdpLayout::specs
  int64_t row_begin = 0, row_end = 0;
  int64_t row_numel = 0;  // elements per row (dim 0)
  int64_t offset = 0;     // first element in the unit's flat buffer
  int64_t numel() const { return (row_end - row_begin) * row_numel; }
};

enum class FsdpUnitKind { kEmbedding, kLayer, kFinalNorm, kHead };

struct FsdpUnit {
  FsdpUnitKind kind = FsdpUnitKind::kLayer;
  int64_t layer = -1;                  // kLayer
  int64_t row_begin = 0, row_end = 0;  // kEmbedding / kHead: the vocabulary rows
  std::vector<FsdpMember> members;
  int64_t numel = 0;  // real elements
  int64_t shard = 0;  // elements each rank keeps (padded numel / world)
};

struct FsdpLayout {
  int world = 1;
  int64_t chunk_rows = 0;         // vocabulary rows per embedding / head unit
  std::vector<TensorSpec> specs;  // expected_tensors order
  std::vector<bool> frozen;       // per spec: gathered, never trained (the MoE routing bias)
  std::vector<FsdpUnit> units;    // embedding chunks, layers, final norm, head chunks
  std::vector<size_t> embedding_units, layer_units, head_units;  // head: empty when tied
  size_t final_norm_unit = 0;
  int64_t total_numel() const;
  int64_t shard_numel() const;  // what one rank keeps, padding included
  // The rank's slice of unit u: [begin, end) within the unit's real elements.
  std::pair<int64_t, int64_t> slice(size_t unit, int rank) const;
};

// Chunk rows default so that a chunk holds about as many elements as the largest layer (at
// least 1,024 rows): independent of the world size, so a checkpoint's units are the same for any
// number of ranks and only the slices move.
FsdpLayout plan_fsdp(const ModelConfig& config, int world);

}  // namespace stoa::train
