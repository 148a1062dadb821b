// LFM2's layer binding, shared by lfm2.cpp and lfm2_moe.cpp (the MoE variant differs only in
// the feed-forward of its later layers).
#pragma once
#include <cstdint>

#include "engine/architecture.h"

namespace stoa::engine {

// Norms and mixer (conv or attention) of LFM2 layer i, plus its dense FFN unless the config
// makes it an MoE layer.
DecoderLayer bind_lfm2_layer(const EngineWeights& w, int64_t i);

}  // namespace stoa::engine
