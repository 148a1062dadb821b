// The pipeline-group route (docs/protocol.md, "Pipeline groups"): POST /v1/pipeline/place — a
// worker that cannot hold the whole model asks for its place in a group, and asks again every
// few seconds to stay in it (roles/hub/groups/pipeline_groups.h). Its stage's address is the one
// this connection comes from, with the port it says it serves on.
#include "net/pipeline_protocol.h"
#include "roles/hub/http/server.h"

namespace stoa::hub {

HttpReply HubServer::pipeline_route(const RequestContext& req, const std::string& token) {
  const std::string worker = hub_.access().authenticate(token);
  if (req.method != "POST" || req.path != "/v1/pipeline/place")
    throw RequestError(404, cat("no such route: ", req.method, " ", req.path));
  if (!groups_) throw RequestError(404, "this hub forms no pipeline groups (it has no model)");
  const net::PipelinePlaceRequest m =
      net::pipeline_place_request_from_json(net::parse_body(req.body, "pipeline place"));
  if (m.worker_id != worker) throw RequestError(403, "pipeline place: worker_id is not yours");
  // A member that signs nothing could not be told from a liar: its group's rollouts would carry
  // no chain its head could check (docs/design/pipeline.md, "Blame on the stage that lied").
  if (m.commit_key.empty())
    throw RequestError(400,
                       "pipeline place: no commit_key (the public key this member signs its"
                       " stage commitments with)");
  const std::string address = cat(req.peer_ip, ":", m.port);
  net::PipelinePlace reply;
  std::optional<PipelineMemberPlace> place;
  try {
    const PipelineMemberReport report{m.report.group_id, m.report.breaks, m.report.fault_stage,
                                      m.report.next_failures};
    place = groups_->place(worker, m.memory_bytes, address, hub_.now_ms(), m.relayed, report,
                           m.commit_key);
  } catch (const Error& e) {
    throw RequestError(429, e.what());  // the waiting room is full: ask again later
  }
  reply.waiting = static_cast<int64_t>(groups_->waiting());
  if (place) {
    reply.placed = true;
    reply.group_id = place->group_id;
    reply.stage = place->stage;
    reply.stages = place->stages;
    reply.first_layer = place->span.first;
    reply.last_layer = place->span.last;
    reply.next = place->next;
    reply.serve_key = place->serve_key;
    reply.next_key = place->next_key;
    reply.stage_keys = place->stage_keys;
    // The relay listens from the first hop that needs it (a member behind NAT), not before.
    if (!reply.serve_key.empty() || !reply.next_key.empty()) reply.relay_port = open_stage_relay();
  }
  HttpReply r;
  r.body = net::to_json(reply).dump();
  return r;
}

}  // namespace stoa::hub
