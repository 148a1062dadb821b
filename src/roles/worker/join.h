// Joining the hub, resuming the previous identity when the state dir holds one
// (<state-dir>/worker_id with its proof <state-dir>/worker_secret, passed as resume_id and
// resume_secret so the worker's open leases stay valid).
#pragma once
#include <atomic>
#include <exception>
#include <functional>
#include <string>

#include "net/hub_client.h"

namespace stoa::worker {

// A worker started together with its hub (stoa demo, stoa bench fleet) may come up first, and a
// hub restarting after a crash is briefly away: transport errors, and a hub that keeps answering
// 429 (rate limited) past the HTTP client's own waits, are retried with back-off for
// join_timeout_s (the last error past that, or once `stop` is set). A refusal (net::JoinRefused:
// wrong token) is final. Writes the worker id the hub assigned to <state_dir>/worker_id.
// `on_retry`, when set, hears the error behind each retry (the progress report words it).
// Where to join: --join's URL, token and certificate pin, or --hub and --token.
struct HubTarget {
  std::string url;
  std::string join_token;
  net::HttpClientOptions http;  // the pin, when --join named one
};
HubTarget hub_target(const std::string& hub_url, const std::string& join_token,
                     const std::string& join_string);

net::JoinResponse join_hub(net::HubClient& hub, const std::string& join_token,
                           const std::string& name, int threads, const std::string& state_dir,
                           int join_timeout_s, const std::atomic<bool>& stop,
                           const std::function<void(const std::exception& why)>& on_retry = {},
                           bool* resumed = nullptr);

}  // namespace stoa::worker
