// A worker started without --model takes the run's model files from the hub (the join reply's
// net::RunFile list, roles/hub/store/run_files.h): config.json, the tokenizer and its chat template
// — so a volunteer needs only the worker binary and the join string. Each is checked against its
// content hash and written atomically into the state directory; a file already there with the
// right hash is kept (a restart downloads nothing).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "net/hub_client.h"

namespace stoa::worker {

struct RunFilesFetched {
  std::string dir;             // the model directory to use
  uint64_t bytes_fetched = 0;  // 0 when every file was already there
};

// kInvalidArgument when the hub names no config.json (it serves no run files: the worker needs
// --model); kIntegrity when a file does not hash as named; kNetwork / kIo as the download and
// the disk fail. Names outside net::kRunFileNames were refused when the join reply was parsed.
RunFilesFetched fetch_run_files(net::HubClient& hub, const std::vector<net::RunFile>& files,
                                const std::string& dir);

}  // namespace stoa::worker
