// The swarm in a build without libtorrent-rasterbar (the aarch64 cross build): there is no
// engine, so every call says so and the worker fetches blobs from the hub alone.
#include "core/error.h"
#include "net/swarm/swarm.h"

namespace stoa::net::swarm {

namespace {
[[noreturn]] void absent() {
  fail(ErrorKind::kUnsupported,
       "swarm: this build has no BitTorrent engine (libtorrent-rasterbar was not found when it "
       "was configured)");
}
}  // namespace

bool available() {
  return false;
}
Torrent make_torrent(const std::string&, const std::string&) {
  absent();
}
Torrent parse_torrent(std::vector<char>) {
  absent();
}
std::string announce_reply(const std::vector<PeerAddress>&, int, int, int) {
  absent();
}
std::string announce_failure(const std::string&) {
  absent();
}

struct PeerSession::Impl {};
PeerSession::PeerSession(const PeerSessionOptions&) {
  absent();
}
PeerSession::~PeerSession() = default;
std::string PeerSession::fetch(const FetchRequest&) {
  absent();
}
void PeerSession::release(const std::string&) {
  absent();
}
SwarmStats PeerSession::stats() const {
  absent();
}

}  // namespace stoa::net::swarm
