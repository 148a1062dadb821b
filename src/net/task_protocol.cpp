#include "net/task_protocol.h"

#include "core/error.h"

namespace stoa::net {
namespace {

using nlohmann::json;

std::string text(const json& j, const char* msg, const char* name, size_t max_bytes,
                 bool required = true) {
  STOA_CHECK(j.is_object(), ErrorKind::kInvalidArgument, msg, ": expected a JSON object");
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) {
    STOA_CHECK(!required, ErrorKind::kInvalidArgument, msg, ": missing field '", name, "'");
    return {};
  }
  STOA_CHECK(it->is_string(), ErrorKind::kInvalidArgument, msg, ": field '", name,
             "' is not a string");
  const auto& s = it->get_ref<const std::string&>();
  STOA_CHECK(s.size() <= max_bytes, ErrorKind::kInvalidArgument, msg, ": field '", name,
             "' is longer than ", max_bytes, " bytes");
  return s;
}

bool flag(const json& j, const char* msg, const char* name) {
  auto it = j.find(name);
  STOA_CHECK(it != j.end() && it->is_boolean(), ErrorKind::kInvalidArgument, msg, ": field '", name,
             "' is not a boolean");
  return it->get<bool>();
}

constexpr size_t kMaxId = 128;

}  // namespace

json to_json(const TaskPromptRequest& m) {
  return {{"worker_id", m.worker_id}, {"prompt_id", m.prompt_id}};
}

json to_json(const TaskStepRequest& m) {
  return {{"worker_id", m.worker_id},
          {"prompt_id", m.prompt_id},
          {"action", m.action},
          {"tools_allowed", m.tools_allowed}};
}

json to_json(const TaskStepReply& m) {
  return {
      {"kind", m.kind},
      {"tool", m.tool},
      {"content", m.content},
      {"done", m.done},
      {"observation",
       {{"head", m.observation_head}, {"body", m.observation_body}, {"tail", m.observation_tail}}}};
}

TaskPromptRequest task_prompt_request_from_json(const json& j) {
  const char* msg = "task prompt";
  TaskPromptRequest m;
  m.worker_id = text(j, msg, "worker_id", kMaxId);
  m.prompt_id = text(j, msg, "prompt_id", kMaxId);
  return m;
}

TaskStepRequest task_step_request_from_json(const json& j) {
  const char* msg = "task step";
  TaskStepRequest m;
  m.worker_id = text(j, msg, "worker_id", kMaxId);
  m.prompt_id = text(j, msg, "prompt_id", kMaxId);
  m.action = text(j, msg, "action", kMaxTaskActionBytes);
  m.tools_allowed = flag(j, msg, "tools_allowed");
  return m;
}

TaskStepReply task_step_reply_from_json(const json& j) {
  const char* msg = "task step reply";
  TaskStepReply m;
  m.kind = text(j, msg, "kind", 16);
  STOA_CHECK(m.kind == "tool" || m.kind == "answer" || m.kind == "invalid",
             ErrorKind::kInvalidArgument, msg, ": kind '", m.kind,
             "' is none of tool, answer, invalid");
  m.tool = text(j, msg, "tool", kMaxId, false);
  m.content = text(j, msg, "content", kMaxTaskReplyBytes, false);
  m.done = flag(j, msg, "done");
  if (j.contains("observation") && !j.at("observation").is_null()) {
    const json& o = j.at("observation");
    m.observation_head = text(o, msg, "head", kMaxTaskReplyBytes, false);
    m.observation_body = text(o, msg, "body", kMaxTaskReplyBytes, false);
    m.observation_tail = text(o, msg, "tail", kMaxTaskReplyBytes, false);
  }
  return m;
}

std::string task_prompt_reply_from_json(const json& j) {
  return text(j, "task prompt reply", "prompt", kMaxTaskReplyBytes);
}

}  // namespace stoa::net
