#include "net/validation_protocol.h"

#include <cmath>

#include "core/error.h"
#include "net/json_fields.h"

namespace stoa::net {
namespace {

using nlohmann::json;
using namespace json_fields;

}  // namespace

json to_json(const ValidationLeaseRequest& m) {
  return {{"validator", m.validator}, {"wait_s", m.wait_s}, {"arithmetic", m.arithmetic}};
}

json to_json(const ValidationJob& m) {
  return {{"job_id", m.job_id},
          {"rollout", to_json(m.rollout)},
          {"problem", m.problem},
          {"prompt_length", m.prompt_length},
          {"sampling", to_json(m.sampling)},
          {"max_tokens", m.max_tokens},
          {"deadline_ms", m.deadline_ms},
          {"task", m.task},
          {"task_options", m.task_options}};
}

json to_json(const ValidationLeaseResponse& m) {
  return {{"job", m.job ? to_json(*m.job) : json(nullptr)}, {"queued", m.queued}};
}

json to_json(const ValidationVerdict& m) {
  json j = {{"job_id", m.job_id}, {"pass", m.pass},     {"position", m.position},
            {"what", m.what},     {"detail", m.detail}, {"cpu_seconds", m.cpu_seconds}};
  // Only when it names a stage: a hub of an earlier build reads the verdict as it always did.
  if (m.blame_stage >= 0) j["blame_stage"] = m.blame_stage;
  return j;
}

ValidationLeaseRequest validation_lease_request_from_json(const json& j) {
  const char* msg = "validation lease";
  STOA_CHECK(j.is_object(), ErrorKind::kInvalidArgument, msg, ": expected a JSON object");
  ValidationLeaseRequest m;
  m.validator = opt<std::string>(j, msg, "validator", m.validator);
  m.wait_s = opt<int64_t>(j, msg, "wait_s", m.wait_s);
  m.arithmetic = arithmetic_field(j, msg);
  STOA_CHECK(m.wait_s >= 0, ErrorKind::kInvalidArgument, msg, ": wait_s must be >= 0");
  STOA_CHECK(m.validator.size() <= 128, ErrorKind::kInvalidArgument, msg,
             ": validator name longer than 128 bytes");
  return m;
}

ValidationJob validation_job_from_json(const json& j) {
  const char* msg = "validation job";
  ValidationJob m;
  m.job_id = req<std::string>(j, msg, "job_id");
  m.rollout = rollout_submission_from_json(require_field(j, msg, "rollout"));
  m.problem = require_field(j, msg, "problem");
  m.prompt_length = req<int64_t>(j, msg, "prompt_length");
  m.sampling = sampling_params_from_json(require_field(j, msg, "sampling"));
  m.max_tokens = req<int64_t>(j, msg, "max_tokens");
  m.deadline_ms = req<int64_t>(j, msg, "deadline_ms");
  m.task = req<std::string>(j, msg, "task");
  m.task_options = task_options_field(j, msg, "task_options");
  STOA_CHECK(m.prompt_length > 0 && static_cast<size_t>(m.prompt_length) <= m.rollout.tokens.size(),
             ErrorKind::kInvalidArgument, msg, ": prompt_length ", m.prompt_length,
             " outside the rollout's ", m.rollout.tokens.size(), " tokens");
  return m;
}

ValidationLeaseResponse validation_lease_response_from_json(const json& j) {
  ValidationLeaseResponse m;
  if (has(j, "job")) m.job = validation_job_from_json(j.at("job"));
  if (has(j, "queued")) m.queued = req<int64_t>(j, "validation lease response", "queued");
  return m;
}

ValidationVerdict validation_verdict_from_json(const json& j) {
  const char* msg = "verdict";
  ValidationVerdict m;
  m.job_id = req<std::string>(j, msg, "job_id");
  STOA_CHECK(!m.job_id.empty(), ErrorKind::kInvalidArgument, msg, ": empty job_id");
  const json& pass = require_field(j, msg, "pass");
  STOA_CHECK(pass.is_boolean(), ErrorKind::kInvalidArgument, msg,
             ": field 'pass' is not true or false");
  m.pass = pass.get<bool>();
  if (has(j, "position")) m.position = req<int64_t>(j, msg, "position");
  if (has(j, "what")) m.what = req<std::string>(j, msg, "what");
  if (has(j, "detail")) m.detail = req<std::string>(j, msg, "detail");
  if (has(j, "cpu_seconds")) {
    const json& c = j.at("cpu_seconds");
    STOA_CHECK(c.is_number(), ErrorKind::kInvalidArgument, msg,
               ": field 'cpu_seconds' is not a number");
    m.cpu_seconds = c.get<double>();
  }
  if (has(j, "blame_stage")) {
    const int64_t b = req<int64_t>(j, msg, "blame_stage");
    STOA_CHECK(b >= -1 && b <= kMaxBlameStage, ErrorKind::kInvalidArgument, msg, ": blame_stage ",
               b, " is not in [-1, ", kMaxBlameStage, "]");
    m.blame_stage = static_cast<int>(b);
  }
  STOA_CHECK(m.position >= -1, ErrorKind::kInvalidArgument, msg, ": position ", m.position,
             " is below -1");
  STOA_CHECK(m.pass || !m.what.empty(), ErrorKind::kInvalidArgument, msg,
             ": a failing verdict must say what differed ('what')");
  STOA_CHECK(!m.pass || m.what.empty(), ErrorKind::kInvalidArgument, msg,
             ": a passing verdict names no difference ('what' = '", m.what.substr(0, 40), "')");
  STOA_CHECK(m.what.size() <= 64, ErrorKind::kInvalidArgument, msg,
             ": 'what' longer than 64 bytes");
  STOA_CHECK(m.detail.size() <= kMaxVerdictDetail, ErrorKind::kInvalidArgument, msg,
             ": 'detail' longer than ", kMaxVerdictDetail, " bytes");
  STOA_CHECK(std::isfinite(m.cpu_seconds) && m.cpu_seconds >= 0 && m.cpu_seconds < 86400,
             ErrorKind::kInvalidArgument, msg, ": cpu_seconds ", m.cpu_seconds,
             " is not in [0, 86400)");
  return m;
}

}  // namespace stoa::net
