// One direction of an emulated access link: a serialised line of `rate_mbit` with a drop-tail
// queue, then a propagation delay with jitter, and random loss. It only computes when a packet
// arrives at the far end; the router holds the packet until then.
//
// Jitter is uniform in [-jitter, +jitter] around the delay (never below 0), and a packet never
// overtakes the one before it on the same link: jitter spreads arrivals without reordering them,
// as on most access lines (netem's default reorders, which real home links rarely do).
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>

#include "core/rng.h"

namespace stoa::net::netem {

struct LinkShape {
  double rate_mbit = 0;  // 0: no limit
  std::chrono::microseconds delay{0};
  std::chrono::microseconds jitter{0};
  double loss = 0;  // the probability a packet is lost, independently
  // The most a packet waits for the line before it is dropped (a home router's buffer, in time).
  std::chrono::milliseconds queue{100};
};

struct LinkCounters {
  uint64_t packets = 0, bytes = 0;  // delivered to the far end (IP packets, headers included)
  uint64_t lost = 0;                // to `loss`
  uint64_t overflowed = 0;          // to a full queue
};

class LinkShaper {
 public:
  using Clock = std::chrono::steady_clock;

  LinkShaper(const LinkShape& shape, Rng rng);  // throws kInvalidArgument for a bad shape

  // When a packet of `bytes` put on the link at `now` reaches the far end; nullopt when it is
  // lost or the queue is full. Calls must come in order of `now`.
  std::optional<Clock::time_point> admit(size_t bytes, Clock::time_point now);

  const LinkShape& shape() const { return shape_; }
  const LinkCounters& counters() const { return counters_; }

 private:
  LinkShape shape_;
  Rng rng_;
  Clock::time_point line_free_{};     // when the line has sent everything queued
  Clock::time_point last_arrival_{};  // no packet arrives before the one sent before it
  LinkCounters counters_;
};

}  // namespace stoa::net::netem
