#include "roles/hub/store/run_files.h"

#include <filesystem>

#include "core/error.h"
#include "core/file_bytes.h"

namespace stoa::hub {

std::vector<net::RunFile> publish_run_files(const std::string& model_dir, pulse::BlobStore& store) {
  namespace fs = std::filesystem;
  std::vector<net::RunFile> out;
  for (const char* name : net::kRunFileNames) {
    const fs::path path = fs::path(model_dir) / name;
    if (!fs::exists(path)) {
      STOA_CHECK(std::string(name) != "config.json", ErrorKind::kNotFound, "run: ", model_dir,
                 " has no config.json");
      continue;
    }
    STOA_CHECK(fs::file_size(path) <= net::kMaxRunFileBytes, ErrorKind::kInvalidArgument,
               "run: ", path.string(), " is larger than a worker takes (", net::kMaxRunFileBytes,
               " bytes)");
    const std::vector<uint8_t> bytes = read_file(path.string());
    out.push_back({name, store.put(bytes).hex(), bytes.size()});
  }
  return out;
}

}  // namespace stoa::hub
