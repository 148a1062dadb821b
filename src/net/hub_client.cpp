#include "net/hub_client.h"

#include "core/error.h"
#include "core/hash.h"

namespace stoa::net {

using nlohmann::json;

namespace {
json parse_response(const HttpResponse& r, const char* what) {
  check_ok(r, what);
  auto j = json::parse(r.body, nullptr, false);
  STOA_CHECK(!j.is_discarded() && j.is_object(), ErrorKind::kNetwork, what,
             ": the hub answered malformed JSON");
  return j;
}
}  // namespace

HubClient::HubClient(std::string base_url, HttpClientOptions options)
    : http_(std::move(base_url), std::move(options)) {}

std::string HubClient::worker_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return worker_id_;
}

std::string HubClient::worker_secret() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rejoin_.resume_secret;
}

void HubClient::adopt_session(const std::string& token) {
  http_.set_bearer_token(token);
  ++generation_;
}

JoinResponse HubClient::join(const std::string& join_token, const JoinRequest& request) {
  std::lock_guard<std::mutex> rejoin(rejoin_mutex_);
  return join_locked(join_token, request);
}

JoinResponse HubClient::join_locked(const std::string& join_token, const JoinRequest& request) {
  // The join token goes with this one request only: other threads keep their session token.
  auto r = http_.post_json("/v1/join", to_json(request).dump(), /*idempotent=*/false,
                           std::chrono::milliseconds{0}, &join_token);
  if (r.status >= 400 && r.status < 500) {
    std::string message = r.body.substr(0, 300);
    auto j = json::parse(r.body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_string())
      message = j["error"].get<std::string>();
    throw JoinRefused(r.status, cat("the hub at ", http_.base_url(), " refused the join (HTTP ",
                                    r.status, "): ", message));
  }
  JoinResponse resp = join_response_from_json(parse_response(r, "join"));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    worker_id_ = resp.worker_id;
    join_token_ = join_token;
    rejoin_ = request;
    rejoin_.resume_id = resp.worker_id;
    // A resume answers no secret: the one we proved with stays ours.
    if (!resp.worker_secret.empty()) rejoin_.resume_secret = resp.worker_secret;
  }
  adopt_session(resp.session_token);
  return resp;
}

HttpResponse HubClient::with_session(const std::function<HttpResponse()>& call) {
  const uint64_t generation = generation_;
  HttpResponse r = call();
  if (r.status != 401) return r;
  {
    std::lock_guard<std::mutex> rejoin(rejoin_mutex_);
    std::string token;
    JoinRequest request;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      token = join_token_;
      request = rejoin_;
    }
    if (token.empty()) return r;  // never joined: the 401 is the answer
    if (generation_ == generation) {
      join_locked(token, request);
      ++renewals_;
    }
  }
  return call();
}

VersionInfo HubClient::version(std::optional<uint64_t> after, std::chrono::seconds timeout) {
  std::string path = cat("/v1/version?timeout=", timeout.count());
  if (after) path += cat("&after=", *after);
  auto r = with_session([&] {
    return http_.get(path, true, std::chrono::milliseconds((timeout.count() + 10) * 1000));
  });
  return version_info_from_json(parse_response(r, "version"));
}

std::vector<uint8_t> HubClient::blob(const std::string& hash_hex) {
  return fetch_verified("/v1/blobs/", hash_hex);
}

std::vector<uint8_t> HubClient::run_file(const std::string& hash_hex) {
  return fetch_verified("/v1/files/", hash_hex);
}

std::vector<uint8_t> HubClient::fetch_verified(const std::string& route,
                                               const std::string& hash_hex) {
  Hash128 want;
  STOA_CHECK(Hash128::parse(hash_hex, &want), ErrorKind::kInvalidArgument, "blob hash '", hash_hex,
             "' is not 32 hex digits");
  auto r = with_session(
      [&] { return http_.get(route + hash_hex, true, std::chrono::milliseconds(300000)); });
  check_ok(r, cat("blob ", hash_hex));
  std::vector<uint8_t> bytes(r.body.begin(), r.body.end());
  Hash128 got = hash_bytes(bytes.data(), bytes.size());
  STOA_CHECK(got == want, ErrorKind::kIntegrity, "blob ", hash_hex, ": received ", bytes.size(),
             " bytes hashing to ", got.hex());
  return bytes;
}

HttpResponse HubClient::session_post(const std::string& route, const std::string& body,
                                     bool idempotent) {
  return with_session([&] { return http_.post_json(route, body, idempotent); });
}

HttpResponse HubClient::session_get(const std::string& route) {
  return with_session([&] { return http_.get(route); });
}

LeaseResponse HubClient::lease() {
  auto r = with_session([&] {
    return http_.post_json("/v1/lease", to_json(LeaseRequest{worker_id()}).dump(), false);
  });
  return lease_response_from_json(parse_response(r, "lease"));
}

void HubClient::release(const std::string& lease_id) {
  auto r = with_session([&] {
    return http_.post_json("/v1/release", to_json(ReleaseRequest{worker_id(), lease_id}).dump(),
                           true);
  });
  check_ok(r, cat("release ", lease_id));
}

RolloutResponse HubClient::submit(const RolloutSubmission& rollout) {
  // Sent as the current identity (a resume after the hub forgot this worker gives a new id).
  auto r = with_session([&] {
    RolloutSubmission m = rollout;
    if (!worker_id().empty()) m.worker_id = worker_id();
    return http_.post_json("/v1/rollouts", to_json(m).dump(), /*idempotent=*/true);
  });
  if (r.status == 422) {
    auto j = json::parse(r.body, nullptr, false);
    if (!j.is_discarded() && j.is_object()) return rollout_response_from_json(j);
  }
  return rollout_response_from_json(parse_response(r, cat("rollout ", rollout.id).c_str()));
}

HeartbeatResponse HubClient::heartbeat(const Heartbeat& heartbeat) {
  auto r = with_session([&] {
    Heartbeat hb = heartbeat;
    if (!worker_id().empty()) hb.worker_id = worker_id();
    return http_.post_json("/v1/heartbeat", to_json(hb).dump(), true);
  });
  auto resp = heartbeat_response_from_json(parse_response(r, "heartbeat"));
  if (!resp.session_token.empty()) adopt_session(resp.session_token);  // rotation
  return resp;
}

PipelinePlace HubClient::pipeline_place(uint64_t memory_bytes, int port, bool relayed,
                                        const PipelineGroupReport& report,
                                        const std::string& commit_key) {
  auto r = with_session([&] {
    PipelinePlaceRequest m{worker_id(), memory_bytes, port, relayed, report, commit_key};
    return http_.post_json("/v1/pipeline/place", to_json(m).dump(), true);
  });
  return pipeline_place_from_json(parse_response(r, "pipeline place"));
}

std::string HubClient::task_prompt(const std::string& prompt_id) {
  auto r = with_session([&] {
    return http_.post_json("/v1/task/prompt",
                           to_json(TaskPromptRequest{worker_id(), prompt_id}).dump(), true);
  });
  return task_prompt_reply_from_json(parse_response(r, "task prompt"));
}

TaskStepReply HubClient::task_step(const std::string& prompt_id, const std::string& action,
                                   bool tools_allowed) {
  auto r = with_session([&] {
    return http_.post_json("/v1/task/step",
                           to_json(TaskStepRequest{worker_id(), prompt_id, action, tools_allowed})
                               .dump(-1, ' ', false, json::error_handler_t::replace),
                           true);
  });
  try {
    return task_step_reply_from_json(parse_response(r, "task step"));
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kNetwork) throw;
    throw Error(ErrorKind::kNetwork, cat("the hub's task step answer: ", e.what()));
  }
}

}  // namespace stoa::net
