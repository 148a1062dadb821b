// Before downloading a model: is there room for it? A volunteer's laptop that cannot hold the
// int8 weights would download gigabytes and then be killed by the kernel's OOM killer; refusing
// up front, with the figures, tells the volunteer what is missing.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "model/memory_need.h"

namespace stoa::worker {

// The model's need (MemoryNeed, memory_needed): model/memory_need.h.

// What this process may still use: MemAvailable (/proc/meminfo), lowered by a cgroup v2 limit
// (memory.max - memory.current) and by `limit_bytes` when set (--max-memory). nullopt when
// none of them could be read (the check is then skipped).
std::optional<uint64_t> memory_available(std::optional<uint64_t> limit_bytes = std::nullopt);

// Throws kIo ("not enough memory for the model") naming both figures when `available` is below the
// need.
void check_memory(const MemoryNeed& need, uint64_t available);

// Free bytes on the file system holding `dir` (nullopt when it cannot be read).
std::optional<uint64_t> disk_free(const std::string& dir);

// "1.2 GB", "340 MB", "12 KB": for messages a volunteer reads.
std::string human_bytes(uint64_t bytes);

}  // namespace stoa::worker
