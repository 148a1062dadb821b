// A whole file as bytes: written atomically, read whole. What must survive a crash as either the
// old file or the new one is written here: PULSE blobs and the catalog, the swarm tracker's
// secret and torrents, the worker's rollout spool and its copies of the run's files. In core
// because those writers sit in layers that do not see each other (pulse, roles/hub, roles/worker).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace stoa {

// Writes `bytes` to `path` atomically: a temp file in the same directory (so the rename does not
// cross file systems), fsync, rename over `path`. A reader sees the old file or the new one,
// never a torn one. kIo naming the file on failure; the temp file is removed.
void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes);
// The file's bytes (kNotFound when it cannot be opened, kIo on a short read).
std::vector<uint8_t> read_file(const std::string& path);
// The file as text, read whole: kNotFound "<path>: cannot open <what>" (e.g. "config file") when
// it cannot be opened, kIo "<path>: read failed" when reading fails.
std::string read_text_file(const std::string& path, const std::string& what);

}  // namespace stoa
