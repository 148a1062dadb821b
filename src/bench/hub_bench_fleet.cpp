#include "bench/hub_bench_fleet.h"

#include <utility>  // before Asio: its awaitable.hpp uses std::exchange

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <thread>

#include "env/token_codec.h"
#include "net/protocol.h"
#include "roles/worker/rollout_record.h"

namespace stoa::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct SimulatedFleet::Impl {
  asio::io_context ioc;
  std::thread thread;
  FleetResults results;  // touched only on the I/O thread (and after it joined)
  std::atomic<int64_t> publish_ns{0};
  std::atomic<uint64_t> published_version{0};
  env::ByteCodec codec;
};

namespace {

awaitable<void> sleep_for(std::chrono::duration<double> d) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(std::chrono::duration_cast<std::chrono::nanoseconds>(d));
  co_await t.async_wait(use_awaitable);
}

asio::ip::address_v4 loopback_source(int i) {
  return asio::ip::address_v4(0x7f000000u | static_cast<uint32_t>(2 + i % 250));
}

// `addresses[i % size]`, or 127.0.0.x when none were given.
asio::ip::address_v4 source_address(const std::vector<std::string>& addresses, int i) {
  if (addresses.empty()) return loopback_source(i);
  return asio::ip::make_address_v4(addresses[static_cast<size_t>(i) % addresses.size()]);
}

// One keep-alive client connection from a given source address.
class Connection {
 public:
  Connection(asio::any_io_executor ex, asio::ip::address_v4 source, const std::string& host,
             int port)
      : stream_(ex), source_(source), host_(asio::ip::make_address_v4(host)), port_(port) {}

  awaitable<void> open() {
    beast::error_code ignored;
    stream_.socket().close(ignored);
    buffer_.clear();
    stream_.socket().open(tcp::v4());
    stream_.socket().bind(tcp::endpoint(source_, 0));
    stream_.expires_after(std::chrono::seconds(10));
    co_await stream_.async_connect(tcp::endpoint(host_, static_cast<uint16_t>(port_)),
                                   use_awaitable);
    open_ = true;
  }

  awaitable<http::response<http::string_body>> call(http::verb verb, const std::string& target,
                                                    const std::string& body,
                                                    const std::string& token,
                                                    std::chrono::seconds timeout) {
    if (!open_) co_await open();
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    if (verb == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    req.keep_alive(true);
    req.prepare_payload();
    stream_.expires_after(timeout);
    try {
      co_await http::async_write(stream_, req, use_awaitable);
      http::response<http::string_body> res;
      co_await http::async_read(stream_, buffer_, res, use_awaitable);
      if (!res.keep_alive()) open_ = false;
      co_return res;
    } catch (...) {
      open_ = false;
      throw;
    }
  }

  tcp::socket& socket() { return stream_.socket(); }

 private:
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  asio::ip::address_v4 source_, host_;
  int port_;
  bool open_ = false;
};

class Fleet {
 public:
  Fleet(SimulatedFleet::Impl& impl, const FleetOptions& options, std::atomic<uint64_t>& joined,
        std::atomic<bool>& measuring)
      : f_(impl), o_(options), joined_(joined), measuring_(measuring) {}

  void spawn() {
    auto ex = f_.ioc.get_executor();
    for (int i = 0; i < o_.workers + o_.slow_workers; ++i)
      asio::co_spawn(ex, worker(i), asio::detached);
    for (int i = 0; i < o_.hoarders; ++i) asio::co_spawn(ex, hoarder(i), asio::detached);
    asio::co_spawn(ex, status_poller(), asio::detached);
    for (int i = 0; i < o_.slow_clients; ++i) asio::co_spawn(ex, slow_client(i), asio::detached);
  }

 private:
  struct WorkerState {
    std::string id, token;
    uint64_t version = 0;
  };

  // A timed call: latency recorded under `endpoint` (measured phase), errors counted.
  awaitable<std::optional<http::response<http::string_body>>> timed(
      Connection& c, const char* endpoint, http::verb verb, const std::string& target,
      const std::string& body, const std::string& token,
      std::chrono::seconds timeout = std::chrono::seconds(30)) {
    auto t0 = Clock::now();
    std::optional<http::response<http::string_body>> res;
    try {
      res = co_await c.call(verb, target, body, token, timeout);
    } catch (const std::exception&) {
      ++f_.results.errors;
      co_return std::nullopt;
    }
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    ++f_.results.statuses[res->result_int()];
    if (res->result_int() >= 500) ++f_.results.errors;
    if (measuring_ && endpoint) f_.results.latency_ms[endpoint].push_back(ms);
    co_return res;
  }

  // Joins (retried until it works) as `name`.
  awaitable<void> join(Connection& api, const std::string& name, WorkerState& state) {
    for (;;) {
      net::JoinRequest jr;
      jr.name = name;
      auto r = co_await timed(api, "join", http::verb::post, "/v1/join", net::to_json(jr).dump(),
                              o_.join_token);
      if (r && r->result_int() == 200) {
        auto j = net::join_response_from_json(nlohmann::json::parse(r->body()));
        state.id = j.worker_id;
        state.token = j.session_token;
        co_return;
      }
      co_await sleep_for(std::chrono::seconds(1));
    }
  }

  // A Sybil: leases whatever the hub gives it (asking again at once after a lease, after the
  // hub's retry hint otherwise), heartbeats every lease it holds, never submits.
  awaitable<void> hoarder(int i) {
    co_await sleep_for(
        std::chrono::duration<double>(o_.ramp_seconds * i / std::max(1, o_.hoarders)));
    auto ex = co_await asio::this_coro::executor;
    WorkerState state;
    Connection api(ex, hoarder_source(i), o_.hub_host, o_.port);
    co_await join(api, "hoarder-" + std::to_string(i), state);
    const std::string lease_body = net::to_json(net::LeaseRequest{state.id}).dump();
    std::vector<std::string> held;
    auto next_beat = Clock::now();
    for (;;) {
      if (Clock::now() >= next_beat) {
        net::Heartbeat hb;
        hb.worker_id = state.id;
        hb.leases = held;
        auto r = co_await timed(api, nullptr, http::verb::post, "/v1/heartbeat",
                                net::to_json(hb).dump(), state.token);
        if (r && r->result_int() == 200) {
          auto resp = net::heartbeat_response_from_json(nlohmann::json::parse(r->body()));
          for (const auto& gone : resp.cancelled) {
            std::erase(held, gone);
            ++f_.results.hoarder_cancelled;
          }
          if (!resp.session_token.empty()) state.token = resp.session_token;
        }
        next_beat = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(o_.heartbeat_seconds));
      }
      auto r = co_await timed(api, nullptr, http::verb::post, "/v1/lease", lease_body, state.token);
      if (!r || r->result_int() != 200) {
        co_await sleep_for(std::chrono::seconds(1));  // a 429: the per-worker lease rate
        continue;
      }
      auto lr = net::lease_response_from_json(nlohmann::json::parse(r->body()));
      if (lr.lease) {
        held.push_back(lr.lease->lease_id);
        ++f_.results.hoarder_leases;
        continue;
      }
      co_await sleep_for(std::chrono::milliseconds(std::max<int64_t>(100, lr.retry_after_ms)));
    }
  }

  asio::ip::address_v4 worker_source(int i) const { return source_address(o_.worker_addresses, i); }
  asio::ip::address_v4 hoarder_source(int i) const {
    return o_.hoarder_addresses.empty() ? loopback_source(o_.workers + o_.slow_workers + i)
                                        : source_address(o_.hoarder_addresses, i);
  }

  // Honest worker i; i >= workers are the slow ones (slow_factor × think_seconds per lease).
  awaitable<void> worker(int i) {
    const bool slow = i >= o_.workers;
    const double think = slow ? o_.think_seconds * o_.slow_factor : o_.think_seconds;
    // With hoarders, the honest workers come after them (the hoarders' ramp): the worst case.
    co_await sleep_for(std::chrono::duration<double>(o_.ramp_seconds * i /
                                                         std::max(1, o_.workers + o_.slow_workers) +
                                                     (o_.hoarders > 0 ? o_.ramp_seconds : 0)));
    auto ex = co_await asio::this_coro::executor;
    auto state = std::make_shared<WorkerState>();
    Connection api(ex, worker_source(i), o_.hub_host, o_.port);
    co_await join(api, (slow ? "slow-" : "bench-") + std::to_string(i), *state);
    if (slow) {
      f_.results.slow_ids.push_back(state->id);
    } else {
      ++joined_;
      ++f_.results.joined;
    }
    asio::co_spawn(ex, long_poll(i, state), asio::detached);
    const std::string lease_body = net::to_json(net::LeaseRequest{state->id}).dump();
    for (;;) {
      auto r =
          co_await timed(api, "lease", http::verb::post, "/v1/lease", lease_body, state->token);
      if (!r || r->result_int() != 200) {
        co_await sleep_for(std::chrono::seconds(1));
        continue;
      }
      auto lr = net::lease_response_from_json(nlohmann::json::parse(r->body()));
      if (!lr.lease) {
        co_await sleep_for(std::chrono::milliseconds(std::max<int64_t>(100, lr.retry_after_ms)));
        continue;
      }
      const net::Lease& lease = *lr.lease;
      if (slow) ++f_.results.slow_leases;
      // Generating: a heartbeat every heartbeat_seconds (and one at the end) renews the lease.
      bool cancelled = false;
      for (double left = think; left > 0 && !cancelled; left -= o_.heartbeat_seconds) {
        co_await sleep_for(std::chrono::duration<double>(std::min(left, o_.heartbeat_seconds)));
        net::Heartbeat hb;
        hb.worker_id = state->id;
        hb.version = state->version;
        hb.leases = {lease.lease_id};
        auto hr = co_await timed(api, "heartbeat", http::verb::post, "/v1/heartbeat",
                                 net::to_json(hb).dump(), state->token);
        if (!hr || hr->result_int() != 200) continue;
        auto resp = net::heartbeat_response_from_json(nlohmann::json::parse(hr->body()));
        if (!resp.session_token.empty()) state->token = resp.session_token;
        for (const auto& gone : resp.cancelled) cancelled = cancelled || gone == lease.lease_id;
      }
      if (cancelled) {  // revoked or preempted: the work is lost, as a real worker's would be
        ++(slow ? f_.results.slow_cancelled : f_.results.honest_cancelled);
        continue;
      }
      uint64_t version = std::max(state->version, lease.issued_at_version);
      for (int32_t s = 0; s < lease.samples; ++s) {
        auto rr =
            co_await timed(api, "rollouts", http::verb::post, "/v1/rollouts",
                           net::to_json(rollout(*state, lease, version)).dump(), state->token);
        const bool accepted =
            rr && rr->result_int() == 200 && rr->body().find("\"accepted\"") != std::string::npos;
        if (accepted && slow) ++f_.results.slow_rollouts_accepted;
        if (accepted && !slow && measuring_) ++f_.results.rollouts_accepted;
      }
    }
  }

  net::RolloutSubmission rollout(const WorkerState& w, const net::Lease& lease, uint64_t version) {
    worker::RolloutRecord record(lease, w.id);  // the worker's own builder
    const std::string text = "<answer>migraine</answer>";
    for (int32_t id : f_.codec.encode(text)) record.add_generated(id, -0.5f, version);
    record.set_answer(text);
    return record.finish();
  }

  // The worker's sync thread: long-polls /v1/version on its own connection; the delay between
  // a publish and the wake-up is the latency recorded.
  awaitable<void> long_poll(int i, std::shared_ptr<WorkerState> state) {
    Connection poll(co_await asio::this_coro::executor, worker_source(i), o_.hub_host, o_.port);
    for (;;) {
      std::string target = "/v1/version?timeout=30";
      if (state->version) target += "&after=" + std::to_string(state->version);
      auto r = co_await timed(poll, nullptr, http::verb::get, target, "", state->token,
                              std::chrono::seconds(40));
      if (!r || r->result_int() != 200) {
        co_await sleep_for(std::chrono::seconds(1));
        continue;
      }
      auto info = net::version_info_from_json(nlohmann::json::parse(r->body()));
      if (info.version && *info.version > state->version) {
        bool first = state->version == 0;
        state->version = *info.version;
        if (!first && measuring_ && *info.version == f_.published_version.load()) {
          int64_t now = Clock::now().time_since_epoch().count();
          f_.results.latency_ms["version_wake"].push_back(
              static_cast<double>(now - f_.publish_ns.load()) / 1e6);
        }
      }
    }
  }

  // The operator's dashboard: /v1/status once a second.
  awaitable<void> status_poller() {
    Connection c(co_await asio::this_coro::executor,
                 o_.worker_addresses.empty() ? asio::ip::address_v4(0x7f000001u)
                                             : asio::ip::make_address_v4(o_.hub_host),
                 o_.hub_host, o_.port);
    for (;;) {
      co_await timed(c, "status", http::verb::get, "/v1/status", "", "");
      co_await sleep_for(std::chrono::seconds(1));
    }
  }

  // One header byte every 5 s, forever; reconnects when the hub cuts it off.
  awaitable<void> slow_client(int i) {
    auto ex = co_await asio::this_coro::executor;
    for (;;) {
      Connection c(ex, asio::ip::address_v4(0x7f000000u | static_cast<uint32_t>(252 + i % 3)),
                   o_.hub_host, o_.port);
      try {
        co_await c.open();
        std::string start = "GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
        co_await asio::async_write(c.socket(), asio::buffer(start), use_awaitable);
        for (;;) {
          co_await sleep_for(std::chrono::seconds(5));
          co_await asio::async_write(c.socket(), asio::buffer("a", 1), use_awaitable);
          // The hub closing the connection shows on the next write or as readable EOF.
          if (c.socket().available() > 0) break;
          char probe;
          beast::error_code ec;
          c.socket().non_blocking(true);
          size_t n = c.socket().receive(asio::buffer(&probe, 1), tcp::socket::message_peek, ec);
          c.socket().non_blocking(false);
          if ((!ec && n == 0) || (ec && ec != asio::error::would_block)) break;
        }
      } catch (const std::exception&) {
      }
      ++f_.results.slow_dropped;
      co_await sleep_for(std::chrono::milliseconds(100));
    }
  }

  SimulatedFleet::Impl& f_;
  const FleetOptions& o_;
  std::atomic<uint64_t>& joined_;
  std::atomic<bool>& measuring_;
};

}  // namespace

SimulatedFleet::SimulatedFleet(FleetOptions options) : options_(std::move(options)) {}

SimulatedFleet::~SimulatedFleet() {
  stop();
  delete impl_;
}

void SimulatedFleet::start() {
  impl_ = new Impl();
  auto fleet = std::make_shared<Fleet>(*impl_, options_, joined_, measuring_);
  fleet->spawn();
  impl_->thread = std::thread([this, fleet] { impl_->ioc.run(); });
}

void SimulatedFleet::published(uint64_t version) {
  if (!impl_) return;
  impl_->publish_ns = Clock::now().time_since_epoch().count();
  impl_->published_version = version;
}

void SimulatedFleet::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->ioc.stop();
  impl_->thread.join();
}

FleetResults SimulatedFleet::results() {
  return impl_ ? impl_->results : FleetResults{};
}

}  // namespace stoa::bench
