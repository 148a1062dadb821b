// The trainer routes (docs/protocol.md, "Trainer"): a trainer behind NAT (`stoa train --hub`)
// dials out to the hub (`stoa hub`) with a token of scope `train` and drives the hub's
// TrainerPort over HTTP — attach, take complete groups, mark them trained or dropped, upload the
// blobs of a version and publish it, and say when the run is finished. Every call is safe to
// repeat: a trainer retries through a restart of the hub, and the ledger's exactly-once holds
// (Hub::hold_for_trainer, the repeat rules of mark_trained / mark_dropped, chunk offsets of
// BlobUpload).
#include <algorithm>
#include <charconv>
#include <filesystem>

#include "roles/hub/http/server.h"
#include "roles/hub/http/trainer_wire.h"

namespace stoa::hub {

using nlohmann::json;

namespace {

// The longest a take of groups waits on a handler thread (the trainer polls again after it).
constexpr int64_t kMaxGroupWaitMs = 10'000;

HttpReply reply(const json& j) {
  HttpReply r;
  r.content_type = "application/json";
  r.body = j.dump();
  return r;
}

json parse_json(const std::string& body, const char* what) {
  try {
    return json::parse(body);
  } catch (const json::exception& e) {
    throw RequestError(400, cat(what, ": the body is not JSON: ", e.what()));
  }
}

uint64_t query_number(const RequestContext& req, const char* name) {
  auto it = req.query.find(name);
  uint64_t v = 0;
  const bool ok =
      it != req.query.end() && !it->second.empty() &&
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), v).ptr ==
          it->second.data() + it->second.size();
  if (!ok) throw RequestError(400, cat("query parameter '", name, "' must be a number"));
  return v;
}

std::vector<std::string> string_list(const json& body, const char* key) {
  try {
    return body.at(key).get<std::vector<std::string>>();
  } catch (const json::exception&) {
    throw RequestError(400, cat("'", key, "' must be a list of strings"));
  }
}

std::string session_of(const json& body) {
  if (!body.contains("session") || !body.at("session").is_string() ||
      body.at("session").get<std::string>().empty())
    throw RequestError(400, "trainer: the body names no 'session' (POST /v1/trainer/attach)");
  return body.at("session").get<std::string>();
}

json upload_json(const UploadState& s) {
  return {{"received", s.received}, {"stored", s.stored}};
}

}  // namespace

void HubServer::check_trainer_session(const std::string& session, bool attach) {
  std::lock_guard<std::mutex> lock(trainer_mutex_);
  if (attach || trainer_session_.empty()) {
    trainer_session_ = session;
    return;
  }
  if (session != trainer_session_)
    throw RequestError(409,
                       "trainer: another trainer attached to this hub after this one; this "
                       "trainer must stop (two trainers never train on one ledger)");
}

HttpReply HubServer::trainer_route(const RequestContext& req, const std::string& bearer) {
  if (!hub_.config().serve_trainer)
    throw RequestError(404,
                       "this hub trains in its own process (`stoa run`); the trainer routes "
                       "are served by `stoa hub`");
  hub_.access().check_trainer(bearer);
  const std::string& p = req.path;
  const bool get = req.method == "GET", post = req.method == "POST";
  const std::string blob_prefix = "/v1/trainer/blobs/";
  if (p.rfind(blob_prefix, 0) == 0) {
    Hash128 hash;
    const std::string hex = p.substr(blob_prefix.size());
    if (hex.size() != 32 || !Hash128::parse(hex, &hash))
      throw RequestError(400, cat("blob name '", hex.substr(0, 64), "' is not 32 hex digits"));
    if (get) return reply(upload_json(uploads_.state(hash)));
    if (post) {
      const uint64_t offset = query_number(req, "offset"), total = query_number(req, "total");
      return reply(upload_json(uploads_.append(hash, offset, total, req.body)));
    }
  }
  if (!post) throw RequestError(404, cat("no such route: ", req.method, " ", p));
  const json body = parse_json(req.body, p.c_str());
  if (p == "/v1/trainer/attach") {
    check_trainer_session(session_of(body), true);
    hub_.hold_for_trainer({});  // what an earlier trainer held and never marked comes back
    json j = {{"last_step", hub_.last_step()}, {"group_size", hub_.config().group_size}};
    if (auto v = hub_.latest_version()) j["latest_version"] = *v;
    return reply(j);
  }
  check_trainer_session(session_of(body), false);
  if (p == "/v1/trainer/groups") {
    hub_.hold_for_trainer(string_list(body, "held"));
    const size_t max_groups = body.value("max_groups", size_t{1});
    const int64_t wait_ms =
        std::clamp<int64_t>(body.value("wait_ms", int64_t{0}), 0, kMaxGroupWaitMs);
    json groups = json::array();
    for (const auto& g : hub_.take_groups(max_groups, std::chrono::milliseconds(wait_ms)))
      groups.push_back(to_json(g));
    return reply({{"groups", groups}});
  }
  if (p == "/v1/trainer/trained") {
    const StepReport report =
        step_report_from_json(body.contains("report") ? body.at("report") : json());
    hub_.mark_trained(string_list(body, "group_ids"), report);
    return reply({{"last_step", hub_.last_step()}});
  }
  if (p == "/v1/trainer/dropped") {
    if (!body.contains("reason") || !body.at("reason").is_string())
      throw RequestError(400, "dropped: 'reason' must be a string");
    hub_.mark_dropped(string_list(body, "group_ids"), body.at("reason").get<std::string>());
    return reply({{"dropped", body.at("group_ids").size()}});
  }
  if (p == "/v1/trainer/finished") {
    // The trainer reached its last step: the run is over for the hub too (its process tells the
    // workers and stops, roles/run/hub_alone.cpp). Repeating it changes nothing.
    hub_.end_run();
    return reply({{"ended", true}, {"last_step", hub_.last_step()}});
  }
  if (p == "/v1/trainer/publish") {
    const PublishedVersion v = published_version_from_json(body);
    // The hub adopts the trainer's catalog only once it holds every blob the catalog names.
    for (const auto& e : v.catalog.entries()) {
      const UploadState s = uploads_.state(e.hash);
      if (!s.stored || s.received != e.bytes)
        throw RequestError(409, cat("publish: version ", v.published.version, " needs blob ",
                                    e.hash.hex(), " (", e.bytes,
                                    " bytes), which the hub does "
                                    "not hold; upload it first"));
    }
    if (auto latest = hub_.latest_version(); latest && v.published.version < *latest)
      throw RequestError(409, cat("publish: version ", v.published.version,
                                  " is older than the hub's latest, ", *latest));
    v.catalog.save(hub_.store().dir() + "/catalog.json");
    std::vector<Hash128> keep = v.catalog.hashes();
    for (const auto& h : v.published.pruned) {
      if (std::find(keep.begin(), keep.end(), h) == keep.end()) hub_.store().remove(h);
    }
    hub_.publish_version(v.published, v.state_hash);
    return reply({{"version", v.published.version}});
  }
  throw RequestError(404, cat("no such route: ", req.method, " ", p));
}

}  // namespace stoa::hub
