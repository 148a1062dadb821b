// One HTTP/1.1 connection of the async server (http_server.h), plain or TLS: reads a request
// under its deadlines, hands it to the WorkPool, writes the reply (a string, or a file range
// streamed from disk in chunks), parks long-polls, keeps the connection alive between requests.
//
// Every member is touched only on the connection's strand. The one read that waits for the first
// byte of the next request also watches a parked request: if it completes with an error or EOF
// while the request is parked, the client is gone and the connection is dropped at once.
#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <deque>
#include <utility>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <nlohmann/json.hpp>

#include "roles/hub/http/http_core.h"

namespace stoa::hub {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

namespace {

HttpReply error_reply(int status, const std::string& message) {
  HttpReply r;
  r.status = status;
  r.body = nlohmann::json{{"error", message}}.dump();
  return r;
}

std::string url_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<uint8_t>(s[i + 1])) &&
               std::isxdigit(static_cast<uint8_t>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

RequestContext context_of(const http::request<http::string_body>& req, const std::string& ip) {
  RequestContext ctx;
  ctx.method = std::string(req.method_string());
  ctx.target = std::string(req.target());
  std::string_view target(ctx.target);
  size_t q = target.find('?');
  ctx.path = url_decode(target.substr(0, q));
  if (q != std::string_view::npos) {
    std::string_view rest = target.substr(q + 1);
    while (!rest.empty()) {
      size_t amp = rest.find('&');
      std::string_view kv = rest.substr(0, amp);
      size_t eq = kv.find('=');
      if (!kv.empty()) {
        ctx.query[url_decode(kv.substr(0, eq))] =
            eq == std::string_view::npos ? "" : url_decode(kv.substr(eq + 1));
      }
      if (amp == std::string_view::npos) break;
      rest = rest.substr(amp + 1);
    }
  }
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ctx.headers[name] = std::string(field.value());
  }
  ctx.body = req.body();
  ctx.peer_ip = ip;
  return ctx;
}

HttpReply run_router(const Router& router, const RequestContext& ctx, HandlerOutcome* parked) {
  try {
    HandlerOutcome out = router(ctx);
    if (auto* reply = std::get_if<HttpReply>(&out)) return std::move(*reply);
    *parked = std::move(out);
    return {};
  } catch (const std::exception& e) {
    return error_reply(500, std::string("internal error: ") + e.what());
  } catch (...) {
    return error_reply(500, "internal error");
  }
}

template <class Stream>
class Connection : public Parkable, public std::enable_shared_from_this<Connection<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;
  static constexpr size_t kFileChunk = 256u << 10;

  template <class... Args>
  Connection(HttpServer::Core& core, std::unique_ptr<ConnectionSlot> slot, Args&&... args)
      : core_(core),
        slot_(std::move(slot)),
        stream_(std::forward<Args>(args)...),
        timer_(stream_.get_executor()),
        settle_timer_(stream_.get_executor()) {}

  ~Connection() override {
    if (park_id_) core_.unpark(park_id_);
    if (fd_ >= 0) ::close(fd_);
    end_file_body();
    settle_handed(true);
  }

  void start() {
    request_start_ = Clock::now();
    if constexpr (kTls) {
      lowest().expires_after(core_.options.header_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->close();
                                self->wait_for_request();
                              });
    } else {
      wait_for_request();
    }
  }

  void wake() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->on_wake(); });
  }

 private:
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // ---- reading a request ----

  void wait_for_request() {
    if (closed_) return;
    if (buffer_.size() > 0) return read_header();
    // A new connection's first request must arrive within the header deadline; between requests
    // the idle timeout applies.
    arm_timer(first_request_ ? request_start_ + core_.options.header_timeout
                             : Clock::now() + core_.options.idle_timeout);
    if (!reading_) read_first_bytes();
  }

  void read_first_bytes() {
    reading_ = true;
    lowest().expires_never();  // the strand's timer_ bounds this read
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              self->on_first_bytes(ec, n);
                            });
  }

  void on_first_bytes(beast::error_code ec, size_t n) {
    reading_ = false;
    if (closed_) return;
    if (ec) {
      if (parked_) ++core_.gone_while_parked;
      return close();
    }
    buffer_.commit(n);
    if (busy_) return;  // parked or handling: the bytes wait in the buffer for the next request
    if (!first_request_) request_start_ = Clock::now();
    read_header();
  }

  void read_header() {
    disarm_timer();
    busy_ = true;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(core_.options.max_header_bytes));
    parser_->body_limit(core_.options.max_body_bytes);
    lowest().expires_at(request_start_ + core_.options.header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (closed_) return;
    if (ec) return on_read_error(ec);
    auto length = parser_->content_length();
    if (length && *length > core_.options.max_body_bytes) return too_large();
    if (parser_->is_done()) return dispatch();
    lowest().expires_after(core_.options.body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code e, size_t) {
                       if (self->closed_) return;
                       if (e) return self->on_read_error(e);
                       self->dispatch();
                     });
  }

  void on_read_error(beast::error_code ec) {
    if (ec == beast::error::timeout) {
      ++core_.timed_out;
      return close();
    }
    if (ec == http::error::body_limit) return too_large();
    if (ec == http::error::header_limit)
      return send(error_reply(431, "request headers too large"),
                  /*close_after=*/true);
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
        ec.category() == asio::error::get_ssl_category() ||
        ec == asio::ssl::error::stream_truncated) {
      return close();
    }
    send(error_reply(400, "malformed HTTP request: " + ec.message()), /*close_after=*/true);
  }

  // A body over the limit: answer 413, then read and discard what the client still sends for a
  // moment, so that it reads the answer instead of a reset.
  void too_large() {
    std::string what = parser_ ? std::string(parser_->get().method_string()) + " " +
                                     std::string(parser_->get().target())
                               : std::string();
    drain_after_write_ = true;
    send(error_reply(413, "request body too large: " + what), /*close_after=*/true);
  }

  // ---- handling ----

  void dispatch() {
    lowest().expires_never();
    auto req = parser_->release();
    parser_.reset();
    first_request_ = false;
    keep_alive_ = req.keep_alive();
    uint64_t epoch = core_.wake_epoch.load();
    auto ctx = std::make_shared<RequestContext>(context_of(req, slot_->ip()));
    bool queued = core_.pool->try_submit([self = this->shared_from_this(), ctx, epoch] {
      auto out = std::make_shared<HandlerOutcome>();
      HttpReply reply = run_router(self->core_.router, *ctx, out.get());
      bool park = std::holds_alternative<ParkedRequest>(*out);
      asio::post(self->stream_.get_executor(),
                 [self, reply = std::move(reply), out, park, epoch]() mutable {
                   if (self->closed_) return;
                   if (park) return self->park(std::move(std::get<ParkedRequest>(*out)), epoch);
                   self->send(std::move(reply));
                 });
    });
    if (!queued) busy_reply();
  }

  void busy_reply() {
    ++core_.busy;
    HttpReply r = error_reply(503, "hub busy: try again shortly");
    r.headers.emplace_back("Retry-After", "1");
    send(std::move(r));
  }

  // ---- parking ----

  void park(ParkedRequest request, uint64_t epoch) {
    parked_ = true;
    parked_request_ = std::move(request);
    park_id_ = core_.park(this->weak_from_this());
    arm_timer(parked_request_.deadline);
    if (!reading_ && buffer_.size() == 0) read_first_bytes();  // watches for the client leaving
    // A wake between the handler's look and this registration would be lost: look again.
    if (core_.wake_epoch.load() != epoch) resume(false);
  }

  void on_wake() {
    if (closed_ || !parked_) return;
    if (resuming_) {
      wake_pending_ = true;
      return;
    }
    resume(false);
  }

  void resume(bool expired) {
    resuming_ = true;
    wake_pending_ = false;
    uint64_t epoch = core_.wake_epoch.load();
    auto fn = parked_request_.resume;
    bool queued = core_.pool->try_submit([self = this->shared_from_this(), fn, expired, epoch] {
      std::optional<HttpReply> reply;
      try {
        reply = fn(expired);
      } catch (const std::exception& e) {
        reply = error_reply(500, std::string("internal error: ") + e.what());
      }
      asio::post(self->stream_.get_executor(),
                 [self, reply = std::move(reply), expired, epoch]() mutable {
                   self->on_resumed(std::move(reply), expired, epoch);
                 });
    });
    if (!queued) {
      resuming_ = false;
      if (expired) {
        unpark();
        busy_reply();
      }  // else: the deadline resumes it
    }
  }

  void on_resumed(std::optional<HttpReply> reply, bool expired, uint64_t epoch) {
    resuming_ = false;
    if (closed_ || !parked_) return;
    if (!reply && expired) reply = error_reply(500, "internal error: a parked request expired");
    if (reply) {
      unpark();
      return send(std::move(*reply));
    }
    if (expire_pending_) return resume(true);
    if (wake_pending_ || core_.wake_epoch.load() != epoch) resume(false);
  }

  void unpark() {
    parked_ = false;
    expire_pending_ = false;
    if (park_id_) core_.unpark(park_id_);
    park_id_ = 0;
    disarm_timer();
  }

  // ---- the one timer: idle / header wait, or a parked request's deadline ----

  void arm_timer(Clock::time_point when) {
    uint64_t gen = ++timer_gen_;
    timer_.expires_at(when);
    timer_.async_wait([self = this->shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->timer_gen_ || self->closed_) return;
      self->on_timer();
    });
  }

  void disarm_timer() {
    ++timer_gen_;
    timer_.cancel();
  }

  void on_timer() {
    if (parked_) {
      if (resuming_) {
        expire_pending_ = true;
        return;
      }
      return resume(true);
    }
    ++core_.timed_out;
    close();
  }

  // ---- writing ----

  void send(HttpReply reply, bool close_after = false) {
    if (closed_) {  // the client left while its request was handled: nothing of it goes out
      if (reply.file && reply.file->on_end) reply.file->on_end(false, 0);
      return;
    }
    reply_ = std::move(reply);
    close_after_ = close_after || reply_.close || !keep_alive_;
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(11);
    res->result(static_cast<unsigned>(reply_.status));
    res->set(http::field::content_type, reply_.content_type);
    for (const auto& [k, v] : reply_.headers) res->set(k, v);
    res->keep_alive(!close_after_);
    if (reply_.file) {
      file_left_ = reply_.file->length;
      fd_ = ::open(reply_.file->path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) {
        end_file_body();
        reply_.file.reset();
        return send(error_reply(500, "cannot open a blob: " + std::string(std::strerror(errno))),
                    close_after);
      }
      file_offset_ = reply_.file->offset;
      file_left_ = reply_.file->length;
      res->content_length(file_left_);
      // The header alone: the serializer of an empty body writes no body bytes.
      auto header = std::make_shared<http::response<http::empty_body>>(std::move(res->base()));
      header->content_length(file_left_);
      lowest().expires_after(core_.options.write_timeout);
      http::async_write(stream_, *header,
                        [self = this->shared_from_this(), header](beast::error_code ec, size_t n) {
                          self->handed_ += n;
                          self->body_start_ = self->handed_;
                          if (ec) return self->close();
                          self->write_file_chunk();
                        });
      return;
    }
    res->body() = std::move(reply_.body);
    res->prepare_payload();
    lowest().expires_after(core_.options.write_timeout);
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res](beast::error_code ec, size_t n) {
                        self->handed_ += n;
                        self->on_written(ec);
                      });
  }

  void write_file_chunk() {
    if (closed_) return;
    if (file_left_ == 0) {
      ::close(fd_);
      fd_ = -1;
      // Handed over whole; it has arrived once the client's TCP acknowledges its last byte.
      if (reply_.file->on_end)
        handed_bodies_.push_back(
            {std::exchange(reply_.file->on_end, nullptr), reply_.file->length, handed_});
      return on_written({});
    }
    if (!chunk_) chunk_ = std::make_unique<std::array<char, kFileChunk>>();
    size_t want = static_cast<size_t>(std::min<uint64_t>(file_left_, kFileChunk));
    ssize_t n = ::pread(fd_, chunk_->data(), want, static_cast<off_t>(file_offset_));
    if (n <= 0) return close();  // the file shrank or failed: the client sees a short body
    file_offset_ += static_cast<uint64_t>(n);
    file_left_ -= static_cast<uint64_t>(n);
    lowest().expires_after(core_.options.write_timeout);
    asio::async_write(stream_, asio::buffer(chunk_->data(), static_cast<size_t>(n)),
                      [self = this->shared_from_this()](beast::error_code ec, size_t written) {
                        self->handed_ += written;
                        if (ec) return self->close();
                        self->write_file_chunk();
                      });
  }

  void on_written(beast::error_code ec) {
    busy_ = false;
    settle_handed(false);
    watch_handed();
    if (ec || closed_) return close();
    lowest().expires_never();
    if (drain_after_write_) return drain();
    // Bodies not yet acknowledged: close gracefully (drain), so the client can read them and
    // its EOF tells that they arrived; closed at once they would count as lost.
    if (close_after_) return handed_bodies_.empty() ? close() : drain();
    wait_for_request();
  }

  void drain() {
    beast::error_code ignored;
    lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    if (reading_) return;  // the pending read ends with EOF or at the timer
    arm_timer(Clock::now() + std::chrono::seconds(5));
    drain_some();
  }

  void drain_some() {
    if (closed_ || drained_ > 4 * core_.options.max_body_bytes + (1u << 20)) return close();
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(64u << 10),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->close();
                              self->drained_ += n;
                              self->drain_some();
                            });
  }

  // ---- how a file body ended (FileBody::on_end), once ----
  // Bytes handed to the socket that the client's TCP has not acknowledged never arrived when
  // the connection ends: a client that stops reading leaves megabytes in the send queue.

  // The body being written when the connection ended (it is the stream's tail), so cut short:
  // a body written whole went to handed_bodies_ and settles there.
  void end_file_body() {
    if (!reply_.file || !reply_.file->on_end) return;
    auto on_end = std::exchange(reply_.file->on_end, nullptr);
    const uint64_t handed = handed_ > body_start_ ? handed_ - body_start_ : 0;
    on_end(false, handed - std::min(handed, unacknowledged_bytes()));
  }

  // Bodies handed over whole: settled as acknowledged, and at close told how much arrived.
  void settle_handed(bool closing) {
    if (handed_bodies_.empty()) return;
    const uint64_t acked = handed_ - std::min(handed_, unacknowledged_bytes());
    while (!handed_bodies_.empty()) {
      HandedBody& b = handed_bodies_.front();
      const uint64_t begin = b.end - b.length;
      if (b.end > acked && !closing) break;
      const uint64_t length = b.length;
      const uint64_t delivered = std::min(length, acked > begin ? acked - begin : 0);
      auto on_end = std::move(b.on_end);
      handed_bodies_.pop_front();  // b is gone from here on
      on_end(delivered == length, delivered);
    }
  }

  // While bodies wait for their acknowledgement, look again every 200 ms (an idle keep-alive
  // connection writes nothing that would).
  void watch_handed() {
    if (handed_bodies_.empty() || closed_ || settle_armed_) return;
    settle_armed_ = true;
    settle_timer_.expires_after(std::chrono::milliseconds(200));
    settle_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      self->settle_armed_ = false;
      if (ec || self->closed_) return;
      self->settle_handed(false);
      self->watch_handed();
    });
  }

  // SIOCOUTQ: what the send queue holds (TLS record bytes over HTTPS, a slight over-count). It
  // still answers after the peer reset the connection.
  uint64_t unacknowledged_bytes() {
    auto& socket = lowest().socket();
    int queued = 0;
    if (!socket.is_open() || ::ioctl(socket.native_handle(), SIOCOUTQ, &queued) != 0) return 0;
    return static_cast<uint64_t>(std::max(queued, 0));
  }

  void close() {
    end_file_body();
    settle_handed(true);
    settle_timer_.cancel();
    if (closed_) return;
    closed_ = true;
    if (parked_) unpark();
    disarm_timer();
    beast::error_code ignored;
    lowest().socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    lowest().close();
  }

  HttpServer::Core& core_;
  std::unique_ptr<ConnectionSlot> slot_;
  Stream stream_;
  asio::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Clock::time_point request_start_;
  bool first_request_ = true;
  bool keep_alive_ = true;
  bool reading_ = false;  // the first-byte / watch read is pending
  bool busy_ = false;     // a request is being read, handled, parked or answered
  bool closed_ = false;
  bool close_after_ = false;
  bool drain_after_write_ = false;
  uint64_t drained_ = 0;

  bool parked_ = false;
  bool resuming_ = false;
  bool wake_pending_ = false;
  bool expire_pending_ = false;
  uint64_t park_id_ = 0;
  ParkedRequest parked_request_;

  HttpReply reply_;
  int fd_ = -1;
  uint64_t file_offset_ = 0;
  uint64_t file_left_ = 0;
  std::unique_ptr<std::array<char, kFileChunk>> chunk_;
  // Bytes handed to the socket on this connection (before TLS), where the current file body
  // began among them, and the bodies handed over whole not yet acknowledged.
  struct HandedBody {
    std::function<void(bool, uint64_t)> on_end;
    uint64_t length = 0, end = 0;
  };
  uint64_t handed_ = 0, body_start_ = 0;
  std::deque<HandedBody> handed_bodies_;
  asio::steady_timer settle_timer_;
  bool settle_armed_ = false;
};

}  // namespace

void start_connection(HttpServer::Core& core, asio::ip::tcp::socket socket,
                      std::unique_ptr<ConnectionSlot> slot) {
  if (core.ssl) {
    using Tls = beast::ssl_stream<beast::tcp_stream>;
    std::make_shared<Connection<Tls>>(core, std::move(slot), std::move(socket), *core.ssl)->start();
  } else {
    std::make_shared<Connection<beast::tcp_stream>>(core, std::move(slot), std::move(socket))
        ->start();
  }
}

}  // namespace stoa::hub
