// Grow-only scratch buffers for the forward pass. A pass asks for n elements; the buffer grows
// to the largest pass seen and is then reused, so steady-state decode steps (same batch shape
// step after step) allocate nothing. Each block keeps its own thread_local buffers: passes are
// issued by the runner's calling thread (one pass at a time per runner), and the pool workers
// use their own thread_local buffers for per-task scratch.
#pragma once
#include <cstddef>
#include <vector>

namespace stoa::engine {

template <typename T>
T* scratch(std::vector<T>& buffer, size_t n) {
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

}  // namespace stoa::engine
