// The heartbeat's codecs (net/protocol.h): what a worker reports every few seconds — its
// version, leases, rates, a blob download in progress and what it serves to the swarm — and the
// hub's answer.
#include <cmath>

#include "core/error.h"
#include "net/json_fields.h"
#include "net/protocol.h"

namespace stoa::net {

using nlohmann::json;
using namespace json_fields;

json to_json(const BlobDownload& m) {
  return {{"hash", m.hash},
          {"bytes", m.bytes},
          {"total", m.total},
          {"bytes_per_s", m.bytes_per_s},
          {"eta_s", m.eta_s}};
}
json to_json(const SwarmServing& m) {
  return {{"uploaded_bytes", m.uploaded_bytes},
          {"from_peers_bytes", m.from_peers_bytes},
          {"from_hub_bytes", m.from_hub_bytes},
          {"serving_peers", m.serving_peers},
          {"seeding", m.seeding}};
}
json to_json(const Heartbeat& m) {
  json j = {{"worker_id", m.worker_id},
            {"version", m.version ? json(*m.version) : json(nullptr)},
            {"leases", m.leases},
            {"tokens_generated", m.tokens_generated},
            {"tokens_per_s", m.tokens_per_s},
            {"idle_fraction", m.idle_fraction}};
  if (m.download) j["download"] = to_json(*m.download);  // additive: older hubs ignore it
  if (m.swarm) j["swarm"] = to_json(*m.swarm);           // likewise
  return j;
}
Heartbeat heartbeat_from_json(const json& j) {
  const char* msg = "heartbeat";
  Heartbeat m;
  m.worker_id = req<std::string>(j, msg, "worker_id");
  m.version = opt_u64(j, msg, "version");
  m.leases = opt<std::vector<std::string>>(j, msg, "leases", {});
  STOA_CHECK(m.leases.size() <= 1024, ErrorKind::kInvalidArgument, msg, ": too many leases");
  m.tokens_generated = opt<uint64_t>(j, msg, "tokens_generated", 0);
  m.tokens_per_s = opt<double>(j, msg, "tokens_per_s", 0);
  m.idle_fraction = opt<double>(j, msg, "idle_fraction", 0);
  STOA_CHECK(std::isfinite(m.tokens_per_s) && m.tokens_per_s >= 0, ErrorKind::kInvalidArgument, msg,
             ": tokens_per_s must be finite and >= 0");
  if (auto it = j.find("download"); it != j.end() && !it->is_null()) {
    const char* dmsg = "heartbeat download";
    STOA_CHECK(it->is_object(), ErrorKind::kInvalidArgument, dmsg, ": must be an object");
    BlobDownload d;
    d.hash = req<std::string>(*it, dmsg, "hash");
    STOA_CHECK(d.hash.size() <= 64, ErrorKind::kInvalidArgument, dmsg, ": hash too long");
    d.bytes = opt<uint64_t>(*it, dmsg, "bytes", 0);
    d.total = opt<uint64_t>(*it, dmsg, "total", 0);
    d.bytes_per_s = opt<double>(*it, dmsg, "bytes_per_s", 0);
    d.eta_s = opt<double>(*it, dmsg, "eta_s", -1);
    STOA_CHECK(std::isfinite(d.bytes_per_s) && d.bytes_per_s >= 0 && std::isfinite(d.eta_s),
               ErrorKind::kInvalidArgument, dmsg, ": rate and ETA must be finite");
    m.download = std::move(d);
  }
  if (auto it = j.find("swarm"); it != j.end() && !it->is_null()) {
    const char* smsg = "heartbeat swarm";
    STOA_CHECK(it->is_object(), ErrorKind::kInvalidArgument, smsg, ": must be an object");
    SwarmServing s;
    s.uploaded_bytes = opt<uint64_t>(*it, smsg, "uploaded_bytes", 0);
    s.from_peers_bytes = opt<uint64_t>(*it, smsg, "from_peers_bytes", 0);
    s.from_hub_bytes = opt<uint64_t>(*it, smsg, "from_hub_bytes", 0);
    s.serving_peers = opt<int64_t>(*it, smsg, "serving_peers", 0);
    s.seeding = opt<int64_t>(*it, smsg, "seeding", 0);
    STOA_CHECK(
        s.serving_peers >= 0 && s.serving_peers <= 100000 && s.seeding >= 0 && s.seeding <= 100000,
        ErrorKind::kInvalidArgument, smsg, ": peer and blob counts out of range");
    m.swarm = s;
  }
  return m;
}

json to_json(const HeartbeatResponse& m) {
  return {{"latest_version", m.latest_version ? json(*m.latest_version) : json(nullptr)},
          {"renewed", m.renewed},
          {"cancelled", m.cancelled},
          {"session_token", m.session_token},
          {"run_ended", m.run_ended}};
}
HeartbeatResponse heartbeat_response_from_json(const json& j) {
  const char* msg = "heartbeat response";
  HeartbeatResponse m;
  STOA_CHECK(j.is_object(), ErrorKind::kInvalidArgument, msg, ": expected a JSON object");
  m.latest_version = opt_u64(j, msg, "latest_version");
  m.renewed = opt<std::vector<std::string>>(j, msg, "renewed", {});
  m.cancelled = opt<std::vector<std::string>>(j, msg, "cancelled", {});
  m.session_token = opt<std::string>(j, msg, "session_token", "");
  m.run_ended = opt<bool>(j, msg, "run_ended", false);
  return m;
}

}  // namespace stoa::net
