#include "net/netem/link_shaper.h"

#include <algorithm>

#include "core/error.h"

namespace stoa::net::netem {

LinkShaper::LinkShaper(const LinkShape& shape, Rng rng) : shape_(shape), rng_(rng) {
  STOA_CHECK(shape.rate_mbit >= 0 && shape.loss >= 0 && shape.loss <= 1 &&
                 shape.delay.count() >= 0 && shape.jitter.count() >= 0 && shape.queue.count() >= 0,
             ErrorKind::kInvalidArgument,
             "a link needs rate >= 0, delay and jitter >= 0, loss in [0, 1]");
}

std::optional<LinkShaper::Clock::time_point> LinkShaper::admit(size_t bytes,
                                                               Clock::time_point now) {
  Clock::time_point sent = now;
  if (shape_.rate_mbit > 0) {
    const Clock::time_point start = std::max(now, line_free_);
    if (start - now > shape_.queue) {
      ++counters_.overflowed;
      return std::nullopt;
    }
    const double seconds = static_cast<double>(bytes) * 8 / (shape_.rate_mbit * 1e6);
    sent =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    line_free_ = sent;
  }
  // Lost on the wire: after it took its time on the line, as a corrupted frame does.
  if (shape_.loss > 0 && rng_.chance(shape_.loss)) {
    ++counters_.lost;
    return std::nullopt;
  }
  auto delay = std::chrono::duration_cast<Clock::duration>(shape_.delay);
  if (shape_.jitter.count() > 0) {
    const auto j = std::chrono::duration_cast<Clock::duration>(shape_.jitter);
    const double u = rng_.uniform() * 2 - 1;
    delay += std::chrono::duration_cast<Clock::duration>(j * u);
    delay = std::max(delay, Clock::duration::zero());
  }
  const Clock::time_point arrival = std::max(sent + delay, last_arrival_);
  last_arrival_ = arrival;
  ++counters_.packets;
  counters_.bytes += bytes;
  return arrival;
}

}  // namespace stoa::net::netem
