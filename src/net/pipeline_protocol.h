// The pipeline-group messages (docs/protocol.md, "Pipeline groups"): a worker that cannot hold
// the whole model asks the hub for a place in a group (POST /v1/pipeline/place), saying the
// memory it may use and the port it serves a stage on; the hub answers with its place once a
// group whose spans fit its members is formed — which stage, of how many, which layers, and the
// address of the next stage — and every later ask renews the membership (a member silent past
// the hub's timeout dissolves its group: the others are placed again).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace stoa::net {

struct PipelinePlaceRequest {
  std::string worker_id;
  uint64_t memory_bytes = 0;  // what the worker may use (memory_check.h)
  int port = 0;               // where it serves a stage (its address is the one the hub sees)
  // Behind NAT: nobody can dial `port`, so the hop into this worker goes through the hub's relay.
  bool relayed = false;
  // How the member's group has gone so far (PipelineGroupReport; zeros while waiting).
  struct PipelineGroupReport {
    uint64_t group_id = 0;  // the group these counts are of (0: none); others' counts are stale
    // The head: how often its pipeline broke in this group, and the stage the last break named
    // (an error frame names its stage's span); -1 when the break named none (a stall, a link).
    int64_t breaks = 0;
    int fault_stage = -1;
    // A stage: how often the stage after it failed it (stalled past the deadline, dropped the
    // link, could not be reached).
    int64_t next_failures = 0;
  } report;
  // The public half of the Ed25519 key the member signs its commitments with (core/signing.h),
  // 64 hex digits: the hub hands the group's keys to its head, which checks every stage's
  // signature before it submits, and checks them again at intake.
  std::string commit_key;
};
using PipelineGroupReport = PipelinePlaceRequest::PipelineGroupReport;

struct PipelinePlace {
  bool placed = false;  // false: waiting for members
  uint64_t group_id = 0;
  int stage = 0;  // 0: the head, which leases
  int stages = 0;
  int64_t first_layer = 0;  // the span, [first_layer, last_layer)
  int64_t last_layer = 0;
  std::string next;  // host:port of the next stage; empty on the last or when relayed
  // Through the hub's relay (its port at the hub's host: roles/pipeline/stage_relay.h): serve the
  // stage before this one under serve_key, reach the next one under next_key (empty: direct).
  int relay_port = 0;
  std::string serve_key;
  std::string next_key;
  // Every stage's public commitment key, in stage order (the head's first): what the head
  // checks the chain's signatures against (core/stage_commitment.h).
  std::vector<std::string> stage_keys;
  int64_t waiting = 0;  // workers waiting for a group (the hub's count, for the progress lines)
};

nlohmann::json to_json(const PipelinePlaceRequest& m);
nlohmann::json to_json(const PipelinePlace& m);
PipelinePlaceRequest pipeline_place_request_from_json(const nlohmann::json& j);
PipelinePlace pipeline_place_from_json(const nlohmann::json& j);

}  // namespace stoa::net
