#include "net/http_client.h"

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"

namespace stoa::net {

HttpClient::HttpClient(std::string base_url, HttpClientOptions options)
    : base_url_(std::move(base_url)), options_(std::move(options)) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
  STOA_CHECK(base_url_.rfind("http://", 0) == 0 || base_url_.rfind("https://", 0) == 0,
             ErrorKind::kInvalidArgument, "hub URL '", base_url_,
             "' must start with http:// or https://");
  // Fail early on an unparsable URL rather than on the first call.
  release(acquire());
}

HttpClient::~HttpClient() = default;

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

HttpResponse HttpClient::send(const std::string& method, const std::string& path,
                              const std::string* body, bool idempotent,
                              std::chrono::milliseconds read_timeout) {
  const int attempts = idempotent ? std::max(1, options_.max_attempts) : 1;
  std::string last;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) {
      if (on_retry_) on_retry_(attempt, last);
      auto until = std::chrono::steady_clock::now() + backoff(attempt - 1);
      while (!cancelled_ && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (cancelled_) break;
    auto client = acquire();
    auto rt = read_timeout.count() > 0 ? read_timeout : options_.read_timeout;
    client->set_read_timeout(rt.count() / 1000, (rt.count() % 1000) * 1000);
    client->set_write_timeout(rt.count() / 1000, (rt.count() % 1000) * 1000);
    httplib::Headers headers;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
    }
    httplib::Result res = method == "GET"
                              ? client->Get(path.c_str(), headers)
                              : client->Post(path.c_str(), headers, *body, "application/json");
    if (body) bytes_sent_ += body->size();
    if (!res) {
      last = cat(method, " ", base_url_, path, ": ", httplib::to_string(res.error()));
      // A broken keep-alive connection is dropped, not returned to the pool.
      continue;
    }
    bytes_received_ += res->body.size();
    HttpResponse out{res->status, std::move(res->body), res->get_header_value("Content-Type")};
    release(std::move(client));
    bool retryable = out.status >= 500 || out.status == 408 || out.status == 429;
    if (!retryable) return out;
    last = cat(method, " ", base_url_, path, ": HTTP ", out.status, " ", out.body.substr(0, 200));
    if (attempt + 1 == attempts) return out;
  }
  fail(ErrorKind::kNetwork, cancelled_ ? "cancelled: " : "", last.empty() ? path : last, " (after ",
       attempts, attempts == 1 ? " attempt)" : " attempts)");
}

std::string HttpClient::get_stream(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& extra_headers,
    const std::function<bool(int, const HeaderLookup&)>& on_response,
    const std::function<bool(const char*, size_t)>& on_body,
    std::chrono::milliseconds read_timeout) {
  if (cancelled_) return "cancelled";
  auto client = acquire();
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
  return send("GET", path, nullptr, idempotent, read_timeout);
}

HttpResponse HttpClient::post_json(const std::string& path, const std::string& json_body,
                                   bool idempotent, std::chrono::milliseconds read_timeout) {
  return send("POST", path, &json_body, idempotent, read_timeout);
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
