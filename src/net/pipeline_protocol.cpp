#include "net/pipeline_protocol.h"

#include "core/error.h"
#include "core/signing.h"
#include "net/json_fields.h"

namespace stoa::net {

using json_fields::opt;
using json_fields::req;
using nlohmann::json;

json to_json(const PipelinePlaceRequest& m) {
  return {{"worker_id", m.worker_id},
          {"memory_bytes", m.memory_bytes},
          {"port", m.port},
          {"relayed", m.relayed},
          {"group_id", m.report.group_id},
          {"breaks", m.report.breaks},
          {"fault_stage", m.report.fault_stage},
          {"next_failures", m.report.next_failures},
          {"commit_key", m.commit_key}};
}

json to_json(const PipelinePlace& m) {
  return {{"placed", m.placed},     {"group_id", m.group_id},       {"stage", m.stage},
          {"stages", m.stages},     {"first_layer", m.first_layer}, {"last_layer", m.last_layer},
          {"next", m.next},         {"relay_port", m.relay_port},   {"serve_key", m.serve_key},
          {"next_key", m.next_key}, {"stage_keys", m.stage_keys},   {"waiting", m.waiting}};
}

PipelinePlaceRequest pipeline_place_request_from_json(const json& j) {
  const char* msg = "pipeline place request";
  PipelinePlaceRequest m;
  m.worker_id = req<std::string>(j, msg, "worker_id");
  m.memory_bytes = req<uint64_t>(j, msg, "memory_bytes");
  m.port = req<int>(j, msg, "port");
  m.relayed = opt<bool>(j, msg, "relayed", false);
  m.report.group_id = opt<uint64_t>(j, msg, "group_id", 0);
  m.report.breaks = opt<int64_t>(j, msg, "breaks", 0);
  m.report.fault_stage = opt<int>(j, msg, "fault_stage", -1);
  m.report.next_failures = opt<int64_t>(j, msg, "next_failures", 0);
  m.commit_key = opt<std::string>(j, msg, "commit_key", "");
  PublicKey key;
  STOA_CHECK(m.commit_key.empty() || parse_hex(m.commit_key, key), ErrorKind::kInvalidArgument, msg,
             ": commit_key is not an Ed25519 public key (64 hex digits)");
  STOA_CHECK(m.report.breaks >= 0 && m.report.next_failures >= 0 && m.report.fault_stage >= -1,
             ErrorKind::kInvalidArgument, msg, ": breaks ", m.report.breaks, ", fault stage ",
             m.report.fault_stage, " and next failures ", m.report.next_failures,
             " are not counts of a group");
  STOA_CHECK(m.port > 0 && m.port <= 65535, ErrorKind::kInvalidArgument, msg, ": port ", m.port,
             " is not a TCP port");
  return m;
}

PipelinePlace pipeline_place_from_json(const json& j) {
  const char* msg = "pipeline place";
  PipelinePlace m;
  m.placed = req<bool>(j, msg, "placed");
  m.waiting = opt<int64_t>(j, msg, "waiting", 0);
  if (!m.placed) return m;
  m.group_id = req<uint64_t>(j, msg, "group_id");
  m.stage = req<int>(j, msg, "stage");
  m.stages = req<int>(j, msg, "stages");
  m.first_layer = req<int64_t>(j, msg, "first_layer");
  m.last_layer = req<int64_t>(j, msg, "last_layer");
  m.next = req<std::string>(j, msg, "next");
  m.relay_port = opt<int>(j, msg, "relay_port", 0);
  m.serve_key = opt<std::string>(j, msg, "serve_key", "");
  m.next_key = opt<std::string>(j, msg, "next_key", "");
  m.stage_keys = opt<std::vector<std::string>>(j, msg, "stage_keys", {});
  PublicKey key;
  for (const std::string& k : m.stage_keys)
    STOA_CHECK(parse_hex(k, key), ErrorKind::kInvalidArgument, msg,
               ": a stage key is not an Ed25519 public key (64 hex digits)");
  STOA_CHECK(m.stage_keys.empty() || static_cast<int>(m.stage_keys.size()) == m.stages,
             ErrorKind::kInvalidArgument, msg, ": ", m.stage_keys.size(), " stage keys for ",
             m.stages, " stages");
  const bool linked = !m.next.empty() || (!m.next_key.empty() && m.relay_port > 0);
  STOA_CHECK(m.stages >= 2 && m.stage >= 0 && m.stage < m.stages && m.first_layer < m.last_layer &&
                 linked == (m.stage < m.stages - 1) &&
                 (m.serve_key.empty() || (m.stage > 0 && m.relay_port > 0)),
             ErrorKind::kInvalidArgument, msg, ": stage ", m.stage, " of ", m.stages,
             " with layers [", m.first_layer, ", ", m.last_layer, "), next '", m.next,
             "' and relay keys '", m.serve_key, "', '", m.next_key, "' is not a place in a group");
  return m;
}

}  // namespace stoa::net
