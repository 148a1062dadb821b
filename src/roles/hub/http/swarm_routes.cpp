// The swarm routes (docs/protocol.md, "Swarm"): what a worker needs to fetch blobs from peers.
//   POST /v1/swarm/key {serve?}      (session)  -> {key, announce, seed}: the worker's swarm key
//   POST /v1/swarm/uplink            (session)  -> {bytes}: an upload-rate probe's body, dropped
//   GET  /v1/swarm/torrents/{hash}   (session)  -> the blob's .torrent (application/x-bittorrent)
//   GET  /v1/swarm/{key}/announce?…  (key)      -> a bencoded tracker reply (BEP 3, compact)
//   GET  /v1/swarm/{key}/blobs/{hash} (key)     -> the blob, with Range: the swarm's web seed
// libtorrent calls the last two itself and cannot add our Authorization header, hence the key
// in the path. A tracker answers 200 with a bencoded failure, never an HTTP error, as clients
// expect.
#include <filesystem>

#include "roles/hub/http/server.h"

namespace stoa::hub {

using nlohmann::json;

namespace {

// What roles/worker/uplink_probe.h sends at most.
constexpr size_t kMaxUplinkProbeBytes = 8u << 20;

bool hex32(const std::string& s, Hash128* out) {
  return s.size() == 32 && Hash128::parse(s, out);
}

HttpReply bencoded(std::string body) {
  HttpReply r;
  r.content_type = "text/plain";
  r.body = std::move(body);
  return r;
}

}  // namespace

HttpReply HubServer::swarm_route(const RequestContext& req, const std::string& token) {
  const std::string& p = req.path;
  const bool get = req.method == "GET", post = req.method == "POST";
  if (!swarm_) throw RequestError(404, "this hub serves no swarm (built without libtorrent)");
  const std::string prefix = "/v1/swarm/";
  const std::string rest = p.substr(prefix.size());
  if (post && rest == "key") {
    const std::string worker = hub_.access().authenticate(token);
    // {"serve": false}: a worker that serves nobody; absent (older workers), one that does.
    const json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    if (!body.is_object()) throw RequestError(400, "swarm key: the body is not a JSON object");
    const auto serve = body.find("serve");
    if (serve != body.end() && !serve->is_boolean())
      throw RequestError(400, "swarm key: \"serve\" is not true or false");
    const std::string key = swarm_->key_for(worker, serve == body.end() || serve->get<bool>());
    HttpReply r;
    r.body = json{{"key", key},
                  {"announce", prefix + key + "/announce"},
                  {"seed", prefix + key + "/blobs/"}}
                 .dump();
    return r;
  }
  if (post && rest == "uplink") {
    const std::string worker = hub_.access().authenticate(token);
    if (const int64_t wait_ms = swarm_->uplink_probe_wait_ms(worker); wait_ms > 0)
      throw RequestError(429, "uplink probe: too many probes from this worker", wait_ms);
    if (req.body.size() > kMaxUplinkProbeBytes)
      throw RequestError(413, "uplink probe: a body over 8 MiB");
    HttpReply r;
    r.body = json{{"bytes", req.body.size()}}.dump();
    return r;
  }
  Hash128 blob;
  if (get && rest.rfind("torrents/", 0) == 0) {
    hub_.access().authenticate(token);
    if (!hex32(rest.substr(9), &blob)) throw RequestError(400, "torrent name is not 32 hex digits");
    const std::vector<char> bytes = swarm_->torrent(blob);
    HttpReply r;
    r.content_type = "application/x-bittorrent";
    r.body.assign(bytes.begin(), bytes.end());
    return r;
  }
  const size_t slash = rest.find('/');
  if (!get || slash == std::string::npos) throw RequestError(404, "no such swarm route");
  const std::string key = rest.substr(0, slash), what = rest.substr(slash + 1);
  if (what == "announce") {
    SwarmAnnounce a;
    auto q = [&](const char* name) {
      auto it = req.query.find(name);
      return it == req.query.end() ? std::string() : it->second;
    };
    a.info_hash = q("info_hash");
    a.ip = req.peer_ip;
    a.event = q("event");
    const std::string port = q("port"), left = q("left");
    const bool numbers = !port.empty() && port.size() <= 5 &&
                         port.find_first_not_of("0123456789") == std::string::npos &&
                         left.size() <= 19 &&
                         left.find_first_not_of("0123456789") == std::string::npos;
    if (!numbers) return bencoded(net::swarm::announce_failure("port or left is not a number"));
    const unsigned long port_number = std::stoul(port);
    if (port_number > 65535) return bencoded(net::swarm::announce_failure("port out of range"));
    a.port = static_cast<uint16_t>(port_number);
    a.left = left.empty() ? 0 : std::stoull(left);
    return bencoded(swarm_->announce(key, a));
  }
  if (what.rfind("blobs/", 0) == 0) {
    const std::optional<SwarmKeyHolder> holder = swarm_->holder_of(key);
    if (!holder) throw RequestError(403, "unknown or refused swarm key");
    const std::string& worker = holder->worker;
    if (!hex32(what.substr(6), &blob)) throw RequestError(400, "blob name is not 32 hex digits");
    // The hub sends each piece a few times; the rest of the swarm gets it from those workers.
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(hub_.store().path_of(blob), ec);
    if (!ec) {
      ByteRange range{0, size};
      if (parse_range(req.header("range"), size, &range) != RangeParse::kRange) range = {0, size};
      if (!swarm_->web_seed_allowed(blob, range.first, range.length, worker)) {
        // The refusal closes the connection: libtorrent drops a web seed that answers 503 and
        // closes it anyway, and the requests it pipelined behind this one would each be allowed
        // (counted as a copy sent) and written into a socket nobody reads any more.
        HttpReply refused;
        refused.status = 503;
        refused.body = json{
            {"error", "this piece has left the hub enough times: ask the swarm"},
            {"retry_after_ms",
             1000}}.dump();
        refused.headers.emplace_back("Retry-After", "1");
        refused.close = true;
        return refused;
      }
      HttpReply reply = blobs_.serve(blob, req, worker);
      // A copy counts once it has left: a reply cut short (the worker got the piece elsewhere
      // and closed) gives its pieces back, as does one the worker's allowance refused. Weak: a
      // connection may end after the server.
      const bool whole =
          reply.file && reply.file->offset == range.first && reply.file->length == range.length;
      if (!reply.file) swarm_->web_seed_cut(blob, range.first, range.length, 0, worker);
      if (whole)
        reply.file->on_end = [tracker = std::weak_ptr<SwarmTracker>(swarm_), blob, range,
                              taker = worker, charged = std::move(reply.file->on_end)](
                                 bool complete, uint64_t delivered) {
          if (charged) charged(complete, delivered);
          if (complete) return;
          if (auto t = tracker.lock())
            t->web_seed_cut(blob, range.first, range.length, delivered, taker);
        };
      return reply;
    }
    return blobs_.serve(blob, req, worker);
  }
  throw RequestError(404, "no such swarm route");
}

}  // namespace stoa::hub
