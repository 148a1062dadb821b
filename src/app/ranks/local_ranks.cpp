// The local rank launcher of `stoa train --nproc` (local_ranks.h).
#include "app/ranks/local_ranks.h"

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/process.h"
#include "train/distributed.h"

namespace stoa::app {
namespace {

// This command's own arguments without --nproc, for its ranks.
std::vector<std::string> rank_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t at = 0; at < all.size();) {
    const size_t end = all.find('\0', at);
    args.push_back(all.substr(at, end - at));
    at = end == std::string::npos ? all.size() : end + 1;
  }
  std::vector<std::string> argv{self_executable()};
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--nproc") {
      ++i;  // and its value
    } else if (args[i].rfind("--nproc=", 0) != 0) {
      argv.push_back(args[i]);
    }
  }
  return argv;
}

volatile std::sig_atomic_t g_launcher_signal = 0;
void on_launcher_signal(int sig) {
  g_launcher_signal = sig;
}

}  // namespace

int launch_local_ranks(int nproc) {
  train::RendezvousServer store(nproc);
  const std::vector<std::string> argv = rank_argv();
  std::vector<Process> ranks;
  ProcessOptions options;
  options.die_with_parent = true;
  for (int r = 0; r < nproc; ++r) {
    setenv("RANK", std::to_string(r).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", std::to_string(store.port()).c_str(), 1);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    ranks.push_back(Process::start(argv, options));
    log_info("train", "rank ", r, " of ", nproc, " pid ", ranks.back().pid());
  }
  std::signal(SIGINT, on_launcher_signal);
  std::signal(SIGTERM, on_launcher_signal);
  int status = 0;
  bool forwarded = false;
  std::vector<bool> done(ranks.size(), false);
  std::chrono::steady_clock::time_point failed_at{};
  for (size_t left = ranks.size(); left > 0;) {
    if (g_launcher_signal != 0 && !forwarded) {
      ranks[0].signal(static_cast<int>(g_launcher_signal));
      forwarded = true;
    }
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (done[r]) continue;
      const std::optional<int> code = ranks[r].poll();
      if (!code) continue;
      done[r] = true;
      --left;
      if (*code != 0 && status == 0) {
        status = *code;
        failed_at = std::chrono::steady_clock::now();
        log_error("train", "rank ", r, " exited with status ", *code, "; stopping the other ranks");
        for (size_t other = 0; other < ranks.size(); ++other) {
          if (!done[other]) ranks[other].signal(SIGTERM);
        }
      }
    }
    if (status != 0 && std::chrono::steady_clock::now() - failed_at > std::chrono::seconds(10)) {
      for (size_t r = 0; r < ranks.size(); ++r) {
        if (!done[r]) ranks[r].signal(SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status == 0 ? 0 : 1;
}

}  // namespace stoa::app
