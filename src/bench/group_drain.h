// The trainer's stand-in in the hub benches (`stoa bench hub`, `stoa bench scale`): a thread that
// takes complete groups as they come and marks them trained at once, so intake never backs up
// behind a trainer and the bench measures the hub alone.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "roles/hub/hub.h"

namespace stoa::bench {

class GroupDrain {
 public:
  // Starts draining `hub`, up to `batch` groups per step.
  GroupDrain(hub::Hub& hub, size_t batch) : hub_(hub), thread_([this, batch] { run(batch); }) {}
  ~GroupDrain() { stop(); }
  GroupDrain(const GroupDrain&) = delete;
  GroupDrain& operator=(const GroupDrain&) = delete;

  // Ends the thread within one take_groups wait (200 ms); idempotent.
  void stop() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
  }
  int64_t groups_taken() const { return groups_taken_; }

 private:
  void run(size_t batch) {
    int64_t step = 0;
    while (running_) {
      const auto groups = hub_.take_groups(batch, std::chrono::milliseconds(200));
      if (groups.empty()) continue;
      std::vector<std::string> ids;
      for (const auto& g : groups) ids.push_back(g.group_id);
      hub::StepReport report;
      report.step = ++step;
      report.groups = static_cast<int64_t>(ids.size());
      hub_.mark_trained(ids, report);
      groups_taken_ += report.groups;
    }
  }

  hub::Hub& hub_;
  std::atomic<bool> running_{true};
  std::atomic<int64_t> groups_taken_{0};
  std::thread thread_;  // last: starts once the members it reads exist
};

}  // namespace stoa::bench
