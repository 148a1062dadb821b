#include "roles/worker/run_files.h"

#include <filesystem>

#include "core/error.h"
#include "core/file_bytes.h"
#include "core/hash.h"

namespace stoa::worker {

RunFilesFetched fetch_run_files(net::HubClient& hub, const std::vector<net::RunFile>& files,
                                const std::string& dir) {
  namespace fs = std::filesystem;
  bool has_config = false;
  for (const auto& f : files) has_config = has_config || f.name == "config.json";
  STOA_CHECK(has_config, ErrorKind::kInvalidArgument,
             "this hub hands out no model files: give the worker --model DIR (the run's "
             "config.json and tokenizer.json, from the operator)");
  fs::create_directories(dir);
  RunFilesFetched out{dir, 0};
  for (const auto& f : files) {
    const std::string path = (fs::path(dir) / f.name).string();
    if (fs::exists(path) && fs::file_size(path) == f.bytes) {
      const std::vector<uint8_t> have = read_file(path);
      if (hash_bytes(have.data(), have.size()).hex() == f.hash) continue;
    }
    const std::vector<uint8_t> bytes = hub.run_file(f.hash);  // verified against f.hash
    write_file_atomic(path, bytes);
    out.bytes_fetched += bytes.size();
  }
  return out;
}

}  // namespace stoa::worker
