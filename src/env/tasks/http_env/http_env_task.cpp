#include "env/tasks/http_env/http_env_task.h"

#include <httplib.h>

#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/log.h"

namespace stoa::env {
namespace {

using nlohmann::json;

constexpr int kProtocol = 1;
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopStringBytes = 64;

[[noreturn]] void env_fail(const std::string& message) {
  throw EnvironmentError(message);
}

const json& member(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) env_fail(cat(where, ": the answer has no '", key, "'"));
  return j.at(key);
}

std::string string_member(const json& j, const char* key, const std::string& where,
                          bool required = true) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) {
    if (required) env_fail(cat(where, ": the answer has no '", key, "'"));
    return {};
  }
  if (!j.at(key).is_string()) env_fail(cat(where, ": '", key, "' is not a string"));
  return j.at(key).get<std::string>();
}

ActionKind parse_kind(const std::string& kind, const std::string& where) {
  if (kind == "tool") return ActionKind::kToolCall;
  if (kind == "answer") return ActionKind::kAnswer;
  if (kind == "invalid") return ActionKind::kInvalid;
  env_fail(cat(where, ": kind '", kind.substr(0, 40), "' is none of tool, answer, invalid"));
}

// /v1/info's optional "version": a string, or a number (its JSON text); "" when absent.
std::string version_of(const json& info, const std::string& where) {
  if (!info.contains("version") || info.at("version").is_null()) return "";
  const json& v = info.at("version");
  if (v.is_string()) return v.get<std::string>().substr(0, 200);
  if (v.is_number()) return v.dump();
  env_fail(cat(where, ": 'version' is neither a string nor a number"));
}

}  // namespace

HttpEnvTask::HttpEnvTask(HttpEnvOptions options) : options_(std::move(options)) {
  const std::string& url = options_.url;
  STOA_CHECK(url.rfind("http://", 0) == 0 && url.size() > 7, ErrorKind::kInvalidArgument,
             "task 'http': url must be http://host:port (got '", url,
             "'); put an https environment behind a local proxy");
  const size_t slash = url.find('/', 7);
  STOA_CHECK(slash == std::string::npos || slash == url.size() - 1, ErrorKind::kInvalidArgument,
             "task 'http': url must be http://host:port without a path (got '", url, "')");
  origin_ = url.substr(0, slash);
  STOA_CHECK(options_.timeout_s > 0 && options_.timeout_s <= 600, ErrorKind::kInvalidArgument,
             "task 'http': timeout_s must be in (0, 600]");
  const json info = call("GET", "/v1/info", nullptr);
  const std::string where = cat("environment ", origin_, " /v1/info");
  const json& protocol = member(info, "protocol", where);
  if (!protocol.is_number_integer() || protocol.get<int64_t>() != kProtocol)
    env_fail(cat(where, ": protocol ", protocol.dump().substr(0, 20), " (this hub speaks ",
                 kProtocol, ")"));
  env_name_ = string_member(info, "name", where);
  const json& stops = member(info, "stop_strings", where);
  if (!stops.is_array() || stops.empty() || stops.size() > kMaxStopStrings)
    env_fail(cat(where, ": stop_strings must be a list of 1 to ", kMaxStopStrings, " strings"));
  for (const auto& s : stops) {
    if (!s.is_string() || s.get<std::string>().empty() ||
        s.get<std::string>().size() > kMaxStopStringBytes)
      env_fail(
          cat(where, ": a stop string is not a string of 1 to ", kMaxStopStringBytes, " bytes"));
    stop_strings_.push_back(s.get<std::string>());
  }
  version_ = version_of(info, where);
  last_version_ = version_;
  version_checked_ = std::chrono::steady_clock::now();
  log_info("task", "environment '", env_name_, "' at ", origin_, ", version ",
           version_.empty() ? "(none given)" : "'" + version_ + "'");
}

void HttpEnvTask::check_version() const {
  std::unique_lock<std::mutex> lock(version_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is looking
  const auto now = std::chrono::steady_clock::now();
  if (now - version_checked_ < std::chrono::duration<double>(options_.version_check_s)) return;
  version_checked_ = now;
  std::string seen;
  try {
    seen = version_of(call("GET", "/v1/info", nullptr), cat("environment ", origin_, " /v1/info"));
  } catch (const EnvironmentError&) {
    return;  // the calls that need the environment report its failures; this look is a bonus
  }
  if (seen == last_version_) return;
  version_changes_.fetch_add(1);
  log_error("task", "ENVIRONMENT CHANGED MID-RUN: '", env_name_, "' at ", origin_,
            " now reports version '", seen, "' (the run started with '", version_, "', last seen '",
            last_version_,
            "'). Rewards before and after are not comparable and replays of older rollouts may "
            "fail; restore the environment the run started with, or start a new run "
            "(docs/environment-protocol.md)");
  last_version_ = seen;
}

json HttpEnvTask::call(const std::string& method, const std::string& path, const json& body) const {
  // A client per call: httplib::Client is not thread-safe, and the hub calls from its handler
  // threads and its validator at once.
  httplib::Client client(origin_);
  const auto seconds = static_cast<time_t>(options_.timeout_s);
  const auto micros =
      static_cast<time_t>((options_.timeout_s - static_cast<double>(seconds)) * 1e6);
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  client.set_write_timeout(seconds, micros);
  // The reply is read up to the limit and no further: a hostile or broken environment cannot
  // make the hub buffer without bound.
  std::string reply;
  bool too_large = false;
  auto receive = [&](const char* data, size_t size) {
    if (reply.size() + size > options_.max_reply_bytes) {
      too_large = true;
      return false;
    }
    reply.append(data, size);
    return true;
  };
  auto send = [&]() -> httplib::Result {
    if (method == "GET") return client.Get(path, receive);
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      return receive(data, size);
    };
    return client.send(req);
  };
  const httplib::Result res = send();
  const std::string where = cat("environment ", origin_, path);
  if (too_large) env_fail(cat(where, ": answer larger than ", options_.max_reply_bytes, " bytes"));
  if (!res) env_fail(cat(where, " unreachable: ", httplib::to_string(res.error())));
  if (res->status != 200)
    env_fail(cat(where, " answered HTTP ", res->status, ": ", reply.substr(0, 300)));
  json parsed = json::parse(reply, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object())
    env_fail(cat(where, ": the answer is not a JSON object"));
  return parsed;
}

std::string HttpEnvTask::user_prompt(const QaItem& problem) const {
  const json answer = call("POST", "/v1/prompt", {{"problem", to_json(problem)}});
  return string_member(answer, "prompt", cat("environment ", origin_, " /v1/prompt"));
}

TurnResult HttpEnvTask::on_turn(const QaItem& problem, std::string_view turn_text,
                                bool tools_allowed) const {
  const json answer = call("POST", "/v1/step",
                           {{"problem", to_json(problem)},
                            {"action", std::string(turn_text)},
                            {"tools_allowed", tools_allowed}});
  const std::string where = cat("environment ", origin_, " /v1/step");
  TurnResult r;
  r.action = parse_kind(string_member(answer, "kind", where), where);
  r.tool = string_member(answer, "tool", where, false);
  r.content = string_member(answer, "content", where, false);
  const json& done = member(answer, "done", where);
  if (!done.is_boolean()) env_fail(cat(where, ": 'done' is not a boolean"));
  r.done = done.get<bool>();
  if (answer.contains("observation") && !answer.at("observation").is_null()) {
    const json& obs = answer.at("observation");
    r.observation.head = string_member(obs, "head", where, false);
    r.observation.body = string_member(obs, "body", where, false);
    r.observation.tail = string_member(obs, "tail", where, false);
  }
  if (r.action == ActionKind::kToolCall && r.tool.empty())
    env_fail(cat(where, ": a tool call without 'tool'"));
  if (!tools_allowed && r.action == ActionKind::kToolCall && !r.observation.joined().empty())
    env_fail(cat(where, ": a tool ran although tools_allowed was false"));
  // The same question must get the same answer, or replay verification would blame the worker.
  const std::string canonical = json{
      {"kind", static_cast<int>(r.action)},
      {"tool", r.tool},
      {"content", r.content},
      {"done", r.done},
      {"head", r.observation.head},
      {"body", r.observation.body},
      {"tail", r.observation.tail}}.dump(-1, ' ', false, json::error_handler_t::replace);
  const Hash128 key = hash_bytes(turn_text.data(), turn_text.size());
  const Hash128 answer_hash = hash_bytes(canonical.data(), canonical.size());
  remember(cat(problem.id, '\n', tools_allowed ? 1 : 0, '\n', key.hex()), answer_hash.low);
  return r;
}

void HttpEnvTask::remember(const std::string& key, uint64_t answer_hash) const {
  std::lock_guard<std::mutex> lock(memo_mutex_);
  auto it = memo_.find(key);
  if (it != memo_.end()) {
    if (it->second.first != answer_hash) {
      nondeterministic_.fetch_add(1);
      env_fail(cat("environment ", origin_, " is not deterministic: problem '",
                   key.substr(0, key.find('\n')),
                   "' got a different /v1/step answer for an action it answered before "
                   "(docs/environment-protocol.md, Determinism)"));
    }
    return;
  }
  memo_order_.push_back(key);
  memo_.emplace(key, std::make_pair(answer_hash, std::prev(memo_order_.end())));
  while (memo_.size() > options_.memo_entries) {
    memo_.erase(memo_order_.front());
    memo_order_.pop_front();
  }
}

double HttpEnvTask::reward(std::string_view response_text,
                           const std::vector<std::string>& golden_answers) const {
  check_version();  // the hub asks for a reward per accepted rollout: a steady, cheap moment
  const json answer =
      call("POST", "/v1/reward",
           {{"response", std::string(response_text)}, {"golden_answers", golden_answers}});
  const std::string where = cat("environment ", origin_, " /v1/reward");
  const json& reward = member(answer, "reward", where);
  if (!reward.is_number() || !std::isfinite(reward.get<double>()))
    env_fail(cat(where, ": 'reward' is not a finite number"));
  return reward.get<double>();
}

TaskKeys http_env_task_keys() {
  return {.accepted = {"url", "timeout_s"}, .local = {"url", "timeout_s"}, .paths = {}};
}

std::unique_ptr<Task> make_http_env_task(const TaskOptions& options) {
  options.expect_only("http", http_env_task_keys().accepted);
  HttpEnvOptions o;
  o.url = options.get("url");
  STOA_CHECK(!o.url.empty(), ErrorKind::kInvalidArgument,
             "task 'http': the option url (the environment server, http://host:port) is "
             "required");
  if (options.has("timeout_s")) {
    const std::string text = options.get("timeout_s");
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    STOA_CHECK(ec == std::errc() && end == text.data() + text.size(), ErrorKind::kInvalidArgument,
               "task 'http': option timeout_s must be a number of seconds, got '", text, "'");
    o.timeout_s = value;
  }
  return std::make_unique<HttpEnvTask>(std::move(o));
}

}  // namespace stoa::env
