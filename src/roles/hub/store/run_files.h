// The run's model files a worker needs besides the weights — config.json, the tokenizer, its
// config and chat template, the generation config — put content-addressed into their own store
// at hub start and named in every join reply (net::RunFile), so `stoa work --join STRING` on a
// machine with nothing but the worker binary has all it needs (roles/worker/run_files.h fetches
// them). The hub's own files are the source, so every worker renders prompts exactly as the hub.
#pragma once
#include <string>
#include <vector>

#include "net/protocol.h"
#include "pulse/blob_store.h"

namespace stoa::hub {

// Every file of net::kRunFileNames that `model_dir` holds, put into `store`. config.json must
// exist (kNotFound); a file over net::kMaxRunFileBytes is kInvalidArgument.
std::vector<net::RunFile> publish_run_files(const std::string& model_dir, pulse::BlobStore& store);

}  // namespace stoa::hub
