// The assets of `stoa bench fleet` — data, BM25 index, tokenizer and model — made once (by the
// stoa binary's own commands) and shared by every configuration of the bench.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "app/fleet/fleet_bench.h"

namespace stoa::app::fleet {

struct Assets {
  std::string data, index, model;  // absolute directories
  int64_t params = 0;              // from the safetensors header
};

// Makes what `dir` lacks with `exe` (the stoa binary); `interrupted` stops it between steps.
Assets prepare_assets(const FleetBenchOptions& options, const std::string& exe,
                      const std::string& dir, const std::atomic<bool>& interrupted);

}  // namespace stoa::app::fleet
