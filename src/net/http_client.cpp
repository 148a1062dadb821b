#include "net/http_client.h"

#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "core/error.h"
#include "net/secret.h"

namespace stoa::net {

// The pinned fingerprint and, after a refused handshake, the one the server showed (the
// verify callback runs inside httplib's connect, which can only report "SSL error").
struct HttpClient::Pin {
  std::string want;  // 64 lowercase hex digits
  std::mutex mutex;
  std::string refused;  // the fingerprint of the last certificate refused
};

namespace {
std::string normalise_fingerprint(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == ':') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  STOA_CHECK(out.size() == 64 && out.find_first_not_of("0123456789abcdef") == std::string::npos,
             ErrorKind::kInvalidArgument, "certificate pin '", text.substr(0, 100),
             "' is not a SHA-256 fingerprint (64 hex digits)");
  return out;
}

// SSL_CTX_set_cert_verify_callback: replaces chain and host-name verification with "the leaf
// certificate's SHA-256 is the pinned one" (a self-signed hub certificate has no CA to check).
int verify_pin(X509_STORE_CTX* store, void* arg) {
  auto* pin = static_cast<HttpClient::Pin*>(arg);
  X509* leaf = X509_STORE_CTX_get0_cert(store);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!leaf || X509_digest(leaf, EVP_sha256(), md, &len) != 1) return 0;
  static const char* kHex = "0123456789abcdef";
  std::string seen;
  for (unsigned int i = 0; i < len; ++i) {
    seen += kHex[md[i] >> 4];
    seen += kHex[md[i] & 15];
  }
  if (constant_time_equal(seen, pin->want)) return 1;
  std::lock_guard<std::mutex> lock(pin->mutex);
  pin->refused = seen;
  return 0;
}

// A 429's wait: the body's retry_after_ms (exact) or the Retry-After header (seconds).
std::chrono::milliseconds retry_after(const httplib::Response& res) {
  auto j = nlohmann::json::parse(res.body, nullptr, false);
  if (j.is_object() && j.contains("retry_after_ms") && j["retry_after_ms"].is_number_integer())
    return std::chrono::milliseconds(std::max<int64_t>(1, j["retry_after_ms"].get<int64_t>()));
  const std::string h = res.get_header_value("Retry-After");
  if (!h.empty() && h.size() < 9 && h.find_first_not_of("0123456789") == std::string::npos)
    return std::chrono::seconds(std::stoll(h));
  return std::chrono::milliseconds(1000);
}
}  // namespace

HttpClient::HttpClient(std::string base_url, HttpClientOptions options)
    : base_url_(std::move(base_url)), options_(std::move(options)) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
  STOA_CHECK(base_url_.rfind("http://", 0) == 0 || base_url_.rfind("https://", 0) == 0,
             ErrorKind::kInvalidArgument, "hub URL '", base_url_,
             "' must start with http:// or https://");
  if (!options_.pin_sha256.empty()) {
    STOA_CHECK(base_url_.rfind("https://", 0) == 0, ErrorKind::kInvalidArgument,
               "a certificate pin needs an https:// hub URL, not '", base_url_, "'");
    pin_ = std::make_shared<Pin>();
    pin_->want = normalise_fingerprint(options_.pin_sha256);
  }
  // Fail early on an unparsable URL rather than on the first call.
  release(acquire());
}

HttpClient::~HttpClient() = default;

// Registers `client` as in flight for its scope. Declared after the client it names, so it ends
// first: cancel() never reaches a client being destroyed (both hold mutex_).
class HttpClient::InFlight {
 public:
  InFlight(HttpClient& owner, httplib::Client* client) : owner_(owner), client_(client) {
    std::lock_guard<std::mutex> lock(owner_.mutex_);
    owner_.in_flight_.push_back(client_);
  }
  ~InFlight() {
    // One entry only: a connection released to the pool mid-scope may be in flight again on
    // another thread, under its own entry.
    std::lock_guard<std::mutex> lock(owner_.mutex_);
    auto& list = owner_.in_flight_;
    if (auto it = std::find(list.begin(), list.end(), client_); it != list.end()) list.erase(it);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  HttpClient& owner_;
  httplib::Client* client_;
};

void HttpClient::cancel() {
  cancelled_ = true;
  // httplib's stop() shuts the socket of a request in flight (its read returns at once) under
  // the client's own socket mutex; an idle pooled connection is not in the list.
  std::lock_guard<std::mutex> lock(mutex_);
  for (httplib::Client* client : in_flight_) client->stop();
}

void HttpClient::set_bearer_token(const std::string& token) {
  std::lock_guard<std::mutex> lock(mutex_);
  token_ = token;
}

std::unique_ptr<httplib::Client> HttpClient::acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pool_.empty()) {
      auto c = std::move(pool_.back());
      pool_.pop_back();
      return c;
    }
  }
  auto c = std::make_unique<httplib::Client>(base_url_);
  STOA_CHECK(c->is_valid(), ErrorKind::kInvalidArgument, "hub URL '", base_url_,
             "' is not a valid http(s) URL");
  c->set_keep_alive(true);
  auto ct = options_.connect_timeout.count();
  c->set_connection_timeout(ct / 1000, (ct % 1000) * 1000);
  if (!options_.ca_cert_path.empty()) c->set_ca_cert_path(options_.ca_cert_path.c_str());
  c->enable_server_certificate_verification(options_.verify_server);
  if (pin_) {
    // httplib's own check (CA chain + host name) is off; the handshake itself refuses any
    // certificate but the pinned one (VERIFY_PEER makes the callback's "no" fatal).
    c->enable_server_certificate_verification(false);
    SSL_CTX* ctx = c->ssl_context();
    STOA_CHECK(ctx, ErrorKind::kInternal, "hub URL '", base_url_, "': no TLS context to pin");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_cert_verify_callback(ctx, verify_pin, pin_.get());
  }
  return c;
}

void HttpClient::release(std::unique_ptr<httplib::Client> client) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pool_.size() < 8) pool_.push_back(std::move(client));
}

std::chrono::milliseconds HttpClient::backoff(int attempt) {
  // Full jitter (AWS architecture blog): uniform in [0, min(max, base * 2^attempt)], so many
  // workers that lost the hub at once do not come back in lockstep.
  int64_t cap = options_.backoff_base.count() << std::min(attempt, 20);
  cap = std::min<int64_t>(cap, options_.backoff_max.count());
  if (cap <= 0) return std::chrono::milliseconds(0);
  std::lock_guard<std::mutex> lock(mutex_);
  return std::chrono::milliseconds(
      static_cast<int64_t>(jitter_.below(static_cast<uint64_t>(cap) + 1)));
}

void HttpClient::sleep_for(std::chrono::milliseconds wait) {
  auto until = std::chrono::steady_clock::now() + wait;
  while (!cancelled_ && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

HttpResponse HttpClient::send(const std::string& method, const std::string& path,
                              const std::string* body, bool idempotent,
                              std::chrono::milliseconds read_timeout, const std::string* bearer) {
  const int attempts = std::max(1, options_.max_attempts);
  std::string last;
  std::chrono::milliseconds wait_429{0};  // > 0: the last answer was a 429
  int attempt = 0;
  for (; attempt < attempts; ++attempt) {
    if (attempt > 0) {
      if (on_retry_) on_retry_(attempt, last);
      sleep_for(wait_429.count() > 0 ? std::min(wait_429, options_.max_retry_after)
                                     : backoff(attempt - 1));
      wait_429 = std::chrono::milliseconds{0};
    }
    if (cancelled_) break;
    auto client = acquire();
    InFlight in_flight(*this, client.get());
    // A cancel() between the check above and the registration found nothing to stop.
    if (cancelled_) break;
    auto rt = read_timeout.count() > 0 ? read_timeout : options_.read_timeout;
    client->set_read_timeout(rt.count() / 1000, (rt.count() % 1000) * 1000);
    client->set_write_timeout(rt.count() / 1000, (rt.count() % 1000) * 1000);
    httplib::Headers headers;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const std::string& token = bearer ? *bearer : token_;
      if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    }
    httplib::Result res = method == "GET"
                              ? client->Get(path.c_str(), headers)
                              : client->Post(path.c_str(), headers, *body, "application/json");
    if (body) bytes_sent_ += body->size();
    if (!res) {
      if (pin_) {
        std::lock_guard<std::mutex> lock(pin_->mutex);
        if (!pin_->refused.empty()) {
          const std::string seen = std::exchange(pin_->refused, "");
          fail(ErrorKind::kIntegrity, "TLS certificate pin mismatch: the hub at ", base_url_,
               " presented a certificate with SHA-256 fingerprint ", seen,
               ", the join string pins ", pin_->want, " — refusing to talk to it");
        }
      }
      last = cat(method, " ", base_url_, path, ": ", httplib::to_string(res.error()));
      // A broken keep-alive connection is dropped, not returned to the pool.
      if (!idempotent) break;
      continue;
    }
    bytes_received_ += res->body.size();
    HttpResponse out{res->status, std::move(res->body), res->get_header_value("Content-Type")};
    if (out.status == 429) wait_429 = retry_after(*res);
    release(std::move(client));
    last =
        cat(method, " ", base_url_, path, ": HTTP ", out.status,
            wait_429.count() > 0 ? cat(" (rate limited: waiting ", wait_429.count(), " ms)") : "",
            " ", out.body.substr(0, 200));
    if (wait_429.count() > 0) {
      // Not processed by the hub (rate limited): safe to send again, idempotent or not.
      ++throttled_;
      if (attempt + 1 < attempts) continue;
      return out;
    }
    bool retryable = out.status >= 500 || out.status == 408;
    if (!retryable || !idempotent || attempt + 1 == attempts) return out;
  }
  const int tried = std::min(attempt + 1, attempts);
  fail(ErrorKind::kNetwork, cancelled_ ? "cancelled: " : "", last.empty() ? path : last, " (after ",
       tried, tried == 1 ? " attempt)" : " attempts)");
}

std::string HttpClient::get_stream(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& extra_headers,
    const std::function<bool(int, const HeaderLookup&)>& on_response,
    const std::function<bool(const char*, size_t)>& on_body,
    std::chrono::milliseconds read_timeout) {
  if (cancelled_) return "cancelled";
  auto client = acquire();
  InFlight in_flight(*this, client.get());
  if (cancelled_) return "cancelled";
  auto rt = read_timeout.count() > 0 ? read_timeout : options_.read_timeout;
  client->set_read_timeout(rt.count() / 1000, (rt.count() % 1000) * 1000);
  httplib::Headers headers(extra_headers.begin(), extra_headers.end());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
  }
  httplib::Result res = client->Get(
      path.c_str(), headers,
      [&](const httplib::Response& r) {
        return on_response(
            r.status, [&r](const std::string& name) { return r.get_header_value(name.c_str()); });
      },
      [&](const char* data, size_t size) {
        bytes_received_ += size;
        return on_body(data, size);
      });
  if (!res) return cat("GET ", base_url_, path, ": ", httplib::to_string(res.error()));
  release(std::move(client));  // a connection that failed or was aborted is dropped instead
  return {};
}

HttpResponse HttpClient::get(const std::string& path, bool idempotent,
                             std::chrono::milliseconds read_timeout) {
  return send("GET", path, nullptr, idempotent, read_timeout, nullptr);
}

HttpResponse HttpClient::post_json(const std::string& path, const std::string& json_body,
                                   bool idempotent, std::chrono::milliseconds read_timeout,
                                   const std::string* bearer) {
  return send("POST", path, &json_body, idempotent, read_timeout, bearer);
}

void check_ok(const HttpResponse& response, const std::string& what) {
  if (response.status >= 200 && response.status < 300) return;
  std::string message = response.body.substr(0, 500);
  auto j = nlohmann::json::parse(response.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) {
    message = j["error"].get<std::string>();
  }
  fail(ErrorKind::kNetwork, what, ": HTTP ", response.status, ": ", message);
}

}  // namespace stoa::net
