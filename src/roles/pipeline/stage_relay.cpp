#include "roles/pipeline/stage_relay.h"

#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace stoa::pipeline {
namespace {

constexpr char kJoin[4] = {'S', 'T', 'R', 'J'};
constexpr char kPaired[4] = {'S', 'T', 'R', 'P'};
constexpr size_t kMaxKey = 64;

std::vector<uint8_t> join_frame(RelayRole role, const std::string& key) {
  std::vector<uint8_t> f(kJoin, kJoin + 4);
  f.push_back(static_cast<uint8_t>(role));
  f.insert(f.end(), key.begin(), key.end());
  return f;
}

}  // namespace

struct StageRelay::Pair {
  net::FrameSocket serve;
  net::FrameSocket dial;
  std::thread to_serve, to_dial;  // the two pumps
  std::atomic<int> pumps_done{0};
  std::atomic<bool> ended{false};
  void end() {
    ended = true;
    serve.shutdown();
    dial.shutdown();
  }
};

net::FrameSocket send_relay_join(const std::string& host, int port, RelayRole role,
                                 const std::string& key, std::chrono::milliseconds deadline) {
  STOA_CHECK(!key.empty() && key.size() <= kMaxKey, ErrorKind::kInvalidArgument,
             "a relay key has 1 to ", kMaxKey, " bytes");
  net::FrameSocket s = net::FrameSocket::connect(host, port, deadline);
  s.send(join_frame(role, key), deadline);
  return s;
}

void await_relay_pair(net::FrameSocket& socket, const std::string& key,
                      std::chrono::milliseconds deadline) {
  const std::vector<uint8_t> reply = socket.receive(deadline, 64);
  STOA_CHECK(reply.size() == 4 && std::memcmp(reply.data(), kPaired, 4) == 0, ErrorKind::kNetwork,
             "the relay at ", socket.peer(), " did not pair key '", key, "'");
}

net::FrameSocket join_relay(const std::string& host, int port, RelayRole role,
                            const std::string& key, std::chrono::milliseconds deadline) {
  net::FrameSocket s = send_relay_join(host, port, role, key, deadline);
  await_relay_pair(s, key, deadline);
  return s;
}

StageRelay::StageRelay(StageRelayOptions options)
    : options_(std::move(options)), listener_(options_.listen_host, options_.listen_port) {
  acceptor_ = std::thread([this] { accept_loop(); });
}

StageRelay::~StageRelay() {
  stop();
}

StageRelayCounters StageRelay::counters() const {
  return {pairs_made_.load(), refused_.load(), frames_.load(), bytes_.load()};
}

void StageRelay::stop() {
  if (stopping_.exchange(true)) return;
  listener_.close();
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::shared_ptr<Pair>> pairs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, socket] : waiting_) socket.shutdown();
    for (auto& p : pairs_) p->end();
    pairs.swap(pairs_);
  }
  for (auto& p : pairs) {
    p->to_serve.join();
    p->to_dial.join();
  }
}

void StageRelay::reap_locked() {
  for (size_t i = 0; i < pairs_.size();) {
    if (pairs_[i]->pumps_done == 2) {
      pairs_[i]->to_serve.join();
      pairs_[i]->to_dial.join();
      pairs_.erase(pairs_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void StageRelay::accept_loop() {
  while (!stopping_) {
    try {
      join(listener_.accept(std::chrono::hours(24)));
    } catch (const Error& e) {
      if (!stopping_) log_info("relay", e.what());
    }
  }
}

void StageRelay::join(net::FrameSocket socket) {
  // The join frame is small and must come soon: a connection that says nothing is dropped.
  const std::vector<uint8_t> f = socket.receive(options_.join_deadline, 4 + 1 + kMaxKey);
  const bool well_formed = f.size() > 5 && std::memcmp(f.data(), kJoin, 4) == 0 &&
                           (f[4] == static_cast<uint8_t>(RelayRole::kServe) ||
                            f[4] == static_cast<uint8_t>(RelayRole::kDial));
  if (!well_formed) {
    ++refused_;
    fail(ErrorKind::kNetwork, socket.peer(), " sent no relay join (a frame of ", f.size(),
         " bytes)");
  }
  const auto role = static_cast<RelayRole>(f[4]);
  const std::string key(f.begin() + 5, f.end());
  const RelayRole other = role == RelayRole::kServe ? RelayRole::kDial : RelayRole::kServe;
  std::lock_guard<std::mutex> lock(mu_);
  reap_locked();
  auto it = waiting_.find({key, other});
  if (it == waiting_.end()) {
    auto same = waiting_.find({key, role});
    if (same != waiting_.end()) {
      same->second = std::move(socket);  // the old connection closes as it is replaced
      return;
    }
    if (static_cast<int64_t>(waiting_.size()) >= options_.max_waiting) {
      ++refused_;
      fail(ErrorKind::kNetwork, socket.peer(), ": ", waiting_.size(),
           " connections wait for their pair already, the relay's bound");
    }
    waiting_.emplace(std::make_pair(key, role), std::move(socket));
    return;
  }
  if (static_cast<int64_t>(pairs_.size()) >= options_.max_pairs) {
    ++refused_;
    fail(ErrorKind::kNetwork, socket.peer(), ": the relay carries ", pairs_.size(),
         " pairs already, its bound");
  }
  auto pair = std::make_shared<Pair>();
  pair->serve = role == RelayRole::kServe ? std::move(socket) : std::move(it->second);
  pair->dial = role == RelayRole::kDial ? std::move(socket) : std::move(it->second);
  waiting_.erase(it);
  const std::vector<uint8_t> paired(kPaired, kPaired + 4);
  pair->serve.send(paired, options_.join_deadline);
  pair->dial.send(paired, options_.join_deadline);
  ++pairs_made_;
  pairs_.push_back(pair);
  pair->to_serve = std::thread([this, pair] { pump(*pair, true); });
  pair->to_dial = std::thread([this, pair] { pump(*pair, false); });
}

void StageRelay::pump(Pair& pair, bool to_serve) {
  net::FrameSocket& from = to_serve ? pair.dial : pair.serve;
  net::FrameSocket& to = to_serve ? pair.serve : pair.dial;
  try {
    while (!pair.ended) {
      const std::vector<uint8_t> frame =
          from.receive(options_.idle_deadline, options_.max_frame_bytes);
      to.send(frame, options_.idle_deadline);
      ++frames_;
      bytes_ += static_cast<int64_t>(frame.size());
    }
  } catch (const Error& e) {
    if (!pair.ended && !stopping_) log_info("relay", "pair ended: ", e.what());
  }
  pair.end();
  ++pair.pumps_done;
}

}  // namespace stoa::pipeline
