// The HTTP(S) client the worker uses to talk to the hub: a bearer token, connect/read timeouts,
// keep-alive connections from a small pool (so it is safe to call from several threads at once —
// the sync thread long-polls while the rollout thread submits), and retries with exponential
// back-off and full jitter for idempotent calls. Non-idempotent calls are tried once.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/rng.h"

namespace httplib {
class Client;
}

namespace stoa::net {

struct HttpClientOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds read_timeout{30000};
  int max_attempts = 6;  // for idempotent calls; 1 for the others
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_max{10000};
  // HTTPS: a CA file to trust (e.g. the hub's self-signed certificate); empty: the system's.
  std::string ca_cert_path;
  bool verify_server = true;
  // HTTPS: the SHA-256 fingerprint (hex, colons allowed) the hub's certificate must have — the
  // join string's pin. Replaces CA and host-name checks; a different certificate is refused
  // (kIntegrity, naming both fingerprints) and never retried.
  std::string pin_sha256;
  // A 429's Retry-After is honoured up to this long per wait.
  std::chrono::milliseconds max_retry_after{60000};
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string content_type;
};

class HttpClient {
 public:
  struct Pin;  // the certificate pin's state (http_client.cpp)

  // base_url: "http://host:port" or "https://host:port" (no path).
  explicit HttpClient(std::string base_url, HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  void set_bearer_token(const std::string& token);
  const std::string& base_url() const { return base_url_; }

  // Answers any status that is not retried (2xx, and 4xx other than 408/429). Retries (when
  // idempotent) transport errors, 5xx and 408 with jittered back-off; a 429 (the hub did not
  // process the request: rate limited) is retried after its Retry-After for every call. Throws
  // stoa::Error(kNetwork) naming the URL and the last failure once the attempts are used up.
  // `read_timeout` overrides the default (long-polls pass their own); `bearer`, when set, is
  // sent instead of the client's token (joining with the join token while other threads go on
  // with the session token).
  HttpResponse get(const std::string& path, bool idempotent = true,
                   std::chrono::milliseconds read_timeout = std::chrono::milliseconds{0});
  HttpResponse post_json(const std::string& path, const std::string& json_body, bool idempotent,
                         std::chrono::milliseconds read_timeout = std::chrono::milliseconds{0},
                         const std::string* bearer = nullptr);
  // How many 429 answers were waited out (the worker's counters, tests).
  uint64_t throttled() const { return throttled_; }

  // One streaming GET on a pooled connection, tried once (the caller resumes: net/spool_download):
  // `extra_headers` go with the bearer token; `on_response` sees the status and looks up response
  // headers before any body byte (false aborts); `on_body` takes each chunk (false aborts).
  // Returns the empty string when the response was read to its end, else why it was not.
  using HeaderLookup = std::function<std::string(const std::string& name)>;
  std::string get_stream(const std::string& path,
                         const std::vector<std::pair<std::string, std::string>>& extra_headers,
                         const std::function<bool(int status, const HeaderLookup&)>& on_response,
                         const std::function<bool(const char* data, size_t size)>& on_body,
                         std::chrono::milliseconds read_timeout);

  // Called between attempts (tests observe retries; a worker can log them).
  void on_retry(std::function<void(int attempt, const std::string& why)> fn) {
    on_retry_ = std::move(fn);
  }
  // Makes every pending and future back-off sleep return at once, stops retrying and shuts the
  // sockets of the calls in flight (shutdown): a call blocked reading an answer that will never
  // come (a hub that died, or a NAT that forgot the connection and refuses the answer) returns
  // now, not at its read timeout.
  void cancel();
  // Calls work again after a cancel (a worker going on once the threads it cancelled are done).
  void clear_cancel() { cancelled_ = false; }
  bool cancelled() const { return cancelled_; }

  uint64_t bytes_received() const { return bytes_received_; }
  uint64_t bytes_sent() const { return bytes_sent_; }

 private:
  std::unique_ptr<httplib::Client> acquire();
  // A call's connection while the call runs, so cancel() can shut its socket (InFlight: the
  // scope that registers it, http_client.cpp).
  class InFlight;
  void release(std::unique_ptr<httplib::Client> client);
  HttpResponse send(const std::string& method, const std::string& path, const std::string* body,
                    bool idempotent, std::chrono::milliseconds read_timeout,
                    const std::string* bearer);
  void sleep_for(std::chrono::milliseconds wait);
  std::chrono::milliseconds backoff(int attempt);

  std::string base_url_;
  HttpClientOptions options_;
  std::mutex mutex_;
  std::string token_;
  std::vector<std::unique_ptr<httplib::Client>> pool_;
  std::vector<httplib::Client*> in_flight_;  // guarded by mutex_
  std::function<void(int, const std::string&)> on_retry_;
  std::atomic<bool> cancelled_{false};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> throttled_{0};
  std::shared_ptr<Pin> pin_;     // set when options_.pin_sha256 is
  Rng jitter_{os_entropy(), 0};  // seeded per client: workers must not retry in lockstep
};

// Raises stoa::Error(kNetwork) for a non-2xx response, quoting the hub's {"error": ...}.
void check_ok(const HttpResponse& response, const std::string& what);

}  // namespace stoa::net
