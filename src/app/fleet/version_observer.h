// The publish moments of `stoa bench fleet`: the hub's versions as a long-polling observer sees
// them, stamped with the wall clock the workers' logs use.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "net/http_client.h"
#include "net/hub_client.h"

namespace stoa::app::fleet {

inline int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Long-polls the hub's /v1/version directly (not through a proxy) and stamps each new version.
class VersionObserver {
 public:
  VersionObserver(const std::string& url, const std::string& join_token) : client_(url, quick()) {
    net::JoinRequest r;
    r.name = "fleet-observer";
    client_.join(join_token, r);
    thread_ = std::thread([this] { loop(); });
  }
  ~VersionObserver() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::map<uint64_t, int64_t> published() {
    std::lock_guard lock(mutex_);
    return published_;
  }
  std::optional<uint64_t> first() {
    std::lock_guard lock(mutex_);
    return first_;
  }

 private:
  static net::HttpClientOptions quick() {
    net::HttpClientOptions o;
    o.max_attempts = 2;
    return o;
  }
  void loop() {
    std::optional<uint64_t> after;
    while (!stop_) {
      try {
        const net::VersionInfo v = client_.version(after, std::chrono::seconds(1));
        if (!v.version || (after && *v.version <= *after)) continue;
        std::lock_guard lock(mutex_);
        if (!first_)
          first_ = *v.version;  // already there when we joined: no publish moment
        else
          published_[*v.version] = unix_ms();
        after = v.version;
      } catch (const std::exception& e) {
        if (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }
  net::HubClient client_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::optional<uint64_t> first_;
  std::map<uint64_t, int64_t> published_;
};

}  // namespace stoa::app::fleet
