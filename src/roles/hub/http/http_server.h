// An asynchronous HTTP/1.1 server (Boost.Asio + Beast, HTTPS through asio::ssl/OpenSSL) for the
// hub: connections cost a socket and a small buffer, not a thread. One I/O thread reads and
// writes every connection; request handlers run on a small bounded WorkPool so that a handler
// that blocks (the hub's mutex, a SQLite commit) never stalls the I/O. A handler may *park* its
// request (a long-poll): the connection then waits on a timer and on wake_parked() without
// holding any thread, and a parked client that closes its socket is dropped at once.
// Abuse limits: a deadline for a whole request's headers and one for its body (a client sending
// one byte every few seconds is cut off), an idle keep-alive timeout, bounded headers and bodies,
// a cap on connections in total and per client IP (over it: 503 with Retry-After, then close).
// See docs/design/hub.md for the concurrency model.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace stoa::hub {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  int io_threads = 1;
  int handler_threads = 4;              // the WorkPool
  size_t max_queued_requests = 4096;    // handlers waiting for a pool thread; more: 503
  size_t max_body_bytes = 32u << 20;    // more: 413
  size_t max_header_bytes = 16u << 10;  // more: 431
  std::chrono::milliseconds header_timeout{10'000};  // first byte to the end of the headers
  std::chrono::milliseconds body_timeout{60'000};    // end of the headers to the end of the body
  std::chrono::milliseconds idle_timeout{30'000};    // keep-alive: between requests
  std::chrono::milliseconds write_timeout{60'000};   // per chunk written (slow downloads go on)
  size_t max_connections = 16'384;
  size_t max_connections_per_ip = 256;
  std::string tls_cert_path;  // both set: HTTPS
  std::string tls_key_path;
};

// What a handler sees of a request: the peer's address for per-IP policies, the headers
// (names lower-cased), the decoded query and the body.
struct RequestContext {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent, with the query
  std::string path;    // without the query
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lower-case name -> value (last one wins)
  std::string body;
  std::string peer_ip;  // "127.0.0.1", "::1"

  std::string header(const std::string& lower_case_name) const;
  bool has_query(const std::string& name) const { return query.count(name) != 0; }
};

// A byte range of a file sent as the body, streamed from disk in chunks.
struct FileBody {
  std::string path;
  uint64_t offset = 0;
  uint64_t length = 0;
  // Called once, on the connection's thread, when the body ends: `complete` when every byte was
  // handed to the socket, false when the connection closed first or the file could not be read
  // (`delivered`: the body's bytes the client's TCP acknowledged by then — handed to the socket,
  // less what its send queue still held). Must not throw or block.
  std::function<void(bool complete, uint64_t delivered)> on_end;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<FileBody> file;  // set: the body is this file range (`body` is ignored)
  bool close = false;            // close the connection after this reply
};

// A request waiting for an event. `resume` runs on the WorkPool after wake_parked() (expired =
// false: answer if there is something new, nullopt to keep waiting) and once at `deadline`
// (expired = true: must answer).
struct ParkedRequest {
  std::chrono::steady_clock::time_point deadline;
  std::function<std::optional<HttpReply>(bool expired)> resume;
};

using HandlerOutcome = std::variant<HttpReply, ParkedRequest>;
// Runs on a WorkPool thread; an exception becomes a 500 JSON reply.
using Router = std::function<HandlerOutcome(const RequestContext&)>;

struct HttpServerStats {
  size_t connections = 0;
  size_t parked = 0;
  uint64_t refused_connections = 0;  // over a connection cap
  uint64_t timed_out = 0;            // header/body deadline or idle timeout
  uint64_t gone_while_parked = 0;    // parked clients that closed their socket
  uint64_t busy_replies = 0;         // 503: the handler queue was full
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, Router router);  // loads the TLS files (throws)
  ~HttpServer();                                         // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds (throws kIo if the address is taken) and serves on background threads.
  void start();
  // Stops accepting, drops every connection and joins the threads. Idempotent.
  void stop();
  int port() const;
  bool tls() const;
  // Thread-safe: every parked request's resume(false) runs soon.
  void wake_parked();
  // wake_parked() as a function that stays safe to call after this server is gone (a no-op
  // then): what an event source holds.
  std::function<void()> waker() const;
  HttpServerStats stats() const;
  // CPU seconds of the server's I/O and handler threads so far.
  double cpu_seconds() const;

  struct Core;

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace stoa::hub
