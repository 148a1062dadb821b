#include "net/protocol.h"

#include <openssl/rand.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <type_traits>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/hash.h"
#include "net/json_fields.h"

namespace stoa::net {
namespace {

using nlohmann::json;
using namespace json_fields;

void check_protocol(int protocol, const char* msg) {
  STOA_CHECK(protocol == kProtocolVersion, ErrorKind::kInvalidArgument, msg, ": protocol version ",
             protocol, " is not supported (this hub speaks ", kProtocolVersion, ")");
}

}  // namespace

std::map<std::string, std::string> task_options_field(const json& j, const char* msg,
                                                      const char* field) {
  std::map<std::string, std::string> out;
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return out;
  STOA_CHECK(it->is_object() && it->size() <= kMaxTaskOptions, ErrorKind::kInvalidArgument, msg,
             ": field '", field, "' is not an object of at most ", kMaxTaskOptions, " strings");
  for (const auto& [key, value] : it->items()) {
    STOA_CHECK(value.is_string() && key.size() <= 64 &&
                   value.get_ref<const std::string&>().size() <= kMaxTaskOptionBytes,
               ErrorKind::kInvalidArgument, msg, ": field '", field, "' entry '", key.substr(0, 64),
               "' is not a string of at most ", kMaxTaskOptionBytes, " bytes");
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

int arithmetic_field(const json& j, const char* msg) {
  const int a = opt<int>(j, msg, "arithmetic", kArithmeticBeforeTheField);
  STOA_CHECK(a >= 1 && a <= kMaxArithmetic, ErrorKind::kInvalidArgument, msg, ": arithmetic ", a,
             " is not an engine arithmetic version (1 to ", kMaxArithmetic, ")");
  return a;
}

constexpr EnumName<IntakeStatus> kIntakeStatusNames[] = {{IntakeStatus::kAccepted, "accepted"},
                                                         {IntakeStatus::kDuplicate, "duplicate"},
                                                         {IntakeStatus::kRejected, "rejected"}};

const char* intake_status_name(IntakeStatus status) {
  return enum_name(kIntakeStatusNames, status);
}

json to_json(const JoinRequest& m) {
  return {{"protocol", m.protocol},
          {"name", m.name},
          {"threads", m.threads},
          {"resume_id", m.resume_id},
          {"resume_secret", m.resume_secret},
          {"arithmetic", m.arithmetic}};
}
JoinRequest join_request_from_json(const json& j) {
  const char* msg = "join request";
  JoinRequest m;
  m.protocol = req<int>(j, msg, "protocol");
  check_protocol(m.protocol, msg);
  m.name = opt<std::string>(j, msg, "name", "");
  STOA_CHECK(m.name.size() <= 128, ErrorKind::kInvalidArgument, msg, ": name longer than 128");
  m.threads = opt<int>(j, msg, "threads", 0);
  m.resume_id = opt<std::string>(j, msg, "resume_id", "");
  m.resume_secret = opt<std::string>(j, msg, "resume_secret", "");
  STOA_CHECK(m.resume_id.size() <= 128 && m.resume_secret.size() <= 128,
             ErrorKind::kInvalidArgument, msg, ": resume_id or resume_secret longer than 128");
  m.arithmetic = arithmetic_field(j, msg);
  return m;
}

namespace {
json run_files_json(const std::vector<RunFile>& files) {
  json out = json::array();
  for (const auto& f : files)
    out.push_back({{"name", f.name}, {"hash", f.hash}, {"bytes", f.bytes}});
  return out;
}
}  // namespace

json to_json(const JoinResponse& m) {
  return {{"protocol", m.protocol},
          {"worker_id", m.worker_id},
          {"session_token", m.session_token},
          {"worker_secret", m.worker_secret},
          {"session_ttl_s", m.session_ttl_s},
          {"heartbeat_interval_s", m.heartbeat_interval_s},
          {"vocab_size", m.vocab_size},
          {"max_tokens", m.max_tokens},
          {"topk", m.topk},
          {"task", m.task},
          {"task_options", m.task_options},
          {"stop_strings", m.stop_strings},
          {"run_files", run_files_json(m.run_files)},
          {"arithmetic", m.arithmetic}};
}
JoinResponse join_response_from_json(const json& j) {
  const char* msg = "join response";
  JoinResponse m;
  m.protocol = req<int>(j, msg, "protocol");
  check_protocol(m.protocol, msg);
  m.worker_id = req<std::string>(j, msg, "worker_id");
  m.session_token = req<std::string>(j, msg, "session_token");
  m.worker_secret = opt<std::string>(j, msg, "worker_secret", "");
  m.session_ttl_s = opt<int64_t>(j, msg, "session_ttl_s", 0);
  m.heartbeat_interval_s = req<int>(j, msg, "heartbeat_interval_s");
  m.vocab_size = req<int64_t>(j, msg, "vocab_size");
  m.max_tokens = req<int64_t>(j, msg, "max_tokens");
  m.topk = opt<int32_t>(j, msg, "topk", 0);
  m.task = opt<std::string>(j, msg, "task", "");
  m.task_options = task_options_field(j, msg, "task_options");
  if (has(j, "stop_strings")) {
    const json& stops = j.at("stop_strings");
    STOA_CHECK(stops.is_array() && stops.size() <= 16, ErrorKind::kInvalidArgument, msg,
               ": stop_strings is not a list of at most 16 strings");
    for (const auto& s : stops) {
      STOA_CHECK(s.is_string() && !s.get_ref<const std::string&>().empty() &&
                     s.get_ref<const std::string&>().size() <= 64,
                 ErrorKind::kInvalidArgument, msg,
                 ": a stop string is not a string of 1 to 64 bytes");
      m.stop_strings.push_back(s.get<std::string>());
    }
  }
  if (has(j, "run_files")) {
    const json& files = j.at("run_files");
    STOA_CHECK(files.is_array() && files.size() <= std::size(kRunFileNames),
               ErrorKind::kInvalidArgument, msg, ": run_files is not a list of at most ",
               std::size(kRunFileNames), " files");
    for (const auto& f : files) {
      RunFile file;
      file.name = req<std::string>(f, msg, "name");
      file.hash = req<std::string>(f, msg, "hash");
      file.bytes = req<uint64_t>(f, msg, "bytes");
      bool known = false;
      for (const char* name : kRunFileNames) known = known || file.name == name;
      Hash128 parsed;
      STOA_CHECK(known && Hash128::parse(file.hash, &parsed) && file.bytes <= kMaxRunFileBytes,
                 ErrorKind::kInvalidArgument, msg, ": run file '", file.name.substr(0, 64),
                 "' is not one a worker takes (a known name, a 32-hex-digit hash, at most ",
                 kMaxRunFileBytes, " bytes)");
      m.run_files.push_back(std::move(file));
    }
  }
  m.arithmetic = arithmetic_field(j, msg);
  return m;
}

json to_json(const BlobRef& m) {
  return {{"kind", m.kind},
          {"from_version", m.from_version},
          {"to_version", m.to_version},
          {"hash", m.hash},
          {"bytes", m.bytes}};
}
BlobRef blob_ref_from_json(const json& j) {
  const char* msg = "blob ref";
  BlobRef m;
  m.kind = req<std::string>(j, msg, "kind");
  STOA_CHECK(m.kind == "anchor" || m.kind == "patch", ErrorKind::kInvalidArgument, msg, ": kind '",
             m.kind, "' is neither anchor nor patch");
  m.from_version = req<uint64_t>(j, msg, "from_version");
  m.to_version = req<uint64_t>(j, msg, "to_version");
  m.hash = req<std::string>(j, msg, "hash");
  STOA_CHECK(m.hash.size() == 32, ErrorKind::kInvalidArgument, msg, ": hash '", m.hash,
             "' is not 32 hex digits");
  m.bytes = req<uint64_t>(j, msg, "bytes");
  return m;
}

json to_json(const VersionInfo& m) {
  json blobs = json::array();
  for (const auto& b : m.blobs) blobs.push_back(to_json(b));
  return {{"version", m.version ? json(*m.version) : json(nullptr)},
          {"state_hash", m.state_hash},
          {"blobs", blobs},
          {"max_staleness", m.max_staleness}};
}
VersionInfo version_info_from_json(const json& j) {
  const char* msg = "version info";
  VersionInfo m;
  STOA_CHECK(j.is_object(), ErrorKind::kInvalidArgument, msg, ": expected a JSON object");
  m.version = opt_u64(j, msg, "version");
  m.state_hash = opt<std::string>(j, msg, "state_hash", "");
  auto blobs = opt<json>(j, msg, "blobs", json::array());
  STOA_CHECK(blobs.is_array(), ErrorKind::kInvalidArgument, msg, ": 'blobs' is not an array");
  for (const auto& b : blobs) m.blobs.push_back(blob_ref_from_json(b));
  m.max_staleness = opt<uint64_t>(j, msg, "max_staleness", 0);
  return m;
}

json to_json(const LeaseRequest& m) {
  return {{"worker_id", m.worker_id}};
}
LeaseRequest lease_request_from_json(const json& j) {
  LeaseRequest m;
  m.worker_id = req<std::string>(j, "lease request", "worker_id");
  return m;
}

json to_json(const SamplingParams& m) {
  return {{"temperature", m.temperature},
          {"top_p", m.top_p},
          {"top_k", m.top_k},
          {"max_new_tokens", m.max_new_tokens},
          {"max_turns", m.max_turns},
          {"max_observation_tokens", m.max_observation_tokens}};
}
SamplingParams sampling_params_from_json(const json& j) {
  const char* msg = "sampling params";
  SamplingParams m;
  m.temperature = req<float>(j, msg, "temperature");
  m.top_p = req<float>(j, msg, "top_p");
  m.top_k = req<int32_t>(j, msg, "top_k");
  m.max_new_tokens = req<int32_t>(j, msg, "max_new_tokens");
  m.max_turns = req<int32_t>(j, msg, "max_turns");
  m.max_observation_tokens = req<int32_t>(j, msg, "max_observation_tokens");
  STOA_CHECK(std::isfinite(m.temperature) && m.temperature >= 0, ErrorKind::kInvalidArgument, msg,
             ": temperature must be finite and >= 0");
  STOA_CHECK(m.top_p > 0 && m.top_p <= 1, ErrorKind::kInvalidArgument, msg,
             ": top_p must be in (0, 1]");
  STOA_CHECK(m.max_new_tokens > 0 && m.max_turns > 0, ErrorKind::kInvalidArgument, msg,
             ": max_new_tokens and max_turns must be positive");
  return m;
}

json to_json(const Lease& m) {
  return {{"lease_id", m.lease_id},
          {"group_id", m.group_id},
          {"prompt_id", m.prompt_id},
          {"question", m.question},
          {"prompt_tokens", m.prompt_tokens},
          {"samples", m.samples},
          {"sampling", to_json(m.sampling)},
          {"deadline_unix_ms", m.deadline_unix_ms},
          {"issued_at_version", m.issued_at_version},
          {"seeds", m.seeds}};
}
Lease lease_from_json(const json& j) {
  const char* msg = "lease";
  Lease m;
  m.lease_id = req<std::string>(j, msg, "lease_id");
  m.group_id = req<std::string>(j, msg, "group_id");
  m.prompt_id = req<std::string>(j, msg, "prompt_id");
  m.question = req<std::string>(j, msg, "question");
  m.prompt_tokens = req<std::vector<int32_t>>(j, msg, "prompt_tokens");
  m.samples = req<int32_t>(j, msg, "samples");
  STOA_CHECK(m.samples > 0, ErrorKind::kInvalidArgument, msg, ": samples must be positive");
  m.sampling = sampling_params_from_json(req<json>(j, msg, "sampling"));
  m.deadline_unix_ms = req<int64_t>(j, msg, "deadline_unix_ms");
  m.issued_at_version = opt<uint64_t>(j, msg, "issued_at_version", 0);
  m.seeds = opt<std::vector<uint64_t>>(j, msg, "seeds", {});
  STOA_CHECK(m.seeds.empty() || m.seeds.size() == static_cast<size_t>(m.samples),
             ErrorKind::kInvalidArgument, msg, ": ", m.seeds.size(), " seeds for ", m.samples,
             " samples");
  return m;
}

json to_json(const LeaseResponse& m) {
  json j = {{"lease", m.lease ? to_json(*m.lease) : json(nullptr)},
            {"retry_after_ms", m.retry_after_ms}};
  if (m.run_ended) j["run_ended"] = true;
  return j;
}
LeaseResponse lease_response_from_json(const json& j) {
  const char* msg = "lease response";
  LeaseResponse m;
  STOA_CHECK(j.is_object(), ErrorKind::kInvalidArgument, msg, ": expected a JSON object");
  auto it = j.find("lease");
  if (it != j.end() && !it->is_null()) m.lease = lease_from_json(*it);
  m.retry_after_ms = opt<int64_t>(j, msg, "retry_after_ms", 0);
  m.run_ended = opt<bool>(j, msg, "run_ended", false);
  return m;
}

json to_json(const ReleaseRequest& m) {
  return {{"worker_id", m.worker_id}, {"lease_id", m.lease_id}};
}
ReleaseRequest release_request_from_json(const json& j) {
  ReleaseRequest m;
  m.worker_id = req<std::string>(j, "release request", "worker_id");
  m.lease_id = req<std::string>(j, "release request", "lease_id");
  return m;
}

json to_json(const RolloutSubmission& m) {
  json j = {{"id", m.id},
            {"worker_id", m.worker_id},
            {"lease_id", m.lease_id},
            {"group_id", m.group_id},
            {"prompt_id", m.prompt_id},
            {"tokens", m.tokens},
            {"mask", m.mask},
            {"logprobs", m.logprobs},
            {"versions", m.versions},
            {"topk", m.topk},
            {"topk_ids", m.topk_ids},
            {"topk_logprobs", m.topk_logprobs},
            {"answer", m.answer},
            {"turns", m.turns},
            {"timings",
             {{"generate_ms", m.timings.generate_ms},
              {"tool_ms", m.timings.tool_ms},
              {"started_unix_ms", m.timings.started_unix_ms},
              {"finished_unix_ms", m.timings.finished_unix_ms}}}};
  if (m.seed) j["seed"] = *m.seed;
  if (!m.kernel_target.empty()) j["kernel_target"] = m.kernel_target;
  if (m.prompt_version) j["prompt_version"] = *m.prompt_version;
  j["arithmetic"] = m.arithmetic;
  if (m.pipeline_group != 0) {
    j["pipeline_group"] = m.pipeline_group;
    json chain = json::array();
    for (const StageCommitment& c : m.stage_commitments)
      chain.push_back({{"stage", c.stage},
                       {"end_layer", c.end_layer},
                       {"rows", c.rows},
                       {"draws", c.draws},
                       {"in", bytes_hex(c.in)},
                       {"out", bytes_hex(c.out)},
                       {"signature", bytes_hex(c.signature)}});
    j["stage_commitments"] = std::move(chain);
  }
  return j;
}

namespace {

// A pipeline rollout's chain: at most kMaxStageCommitments entries, digests and signatures in hex.
std::vector<StageCommitment> stage_commitments_from_json(const json& j, const char* msg) {
  const json chain = req<json>(j, msg, "stage_commitments");
  STOA_CHECK(chain.is_array() && chain.size() <= kMaxStageCommitments, ErrorKind::kInvalidArgument,
             msg, ": field 'stage_commitments' is not an array of at most ", kMaxStageCommitments,
             " commitments");
  std::vector<StageCommitment> out;
  for (const json& e : chain) {
    STOA_CHECK(e.is_object(), ErrorKind::kInvalidArgument, msg,
               ": a stage commitment is not an object");
    const char* what = "stage commitment";
    StageCommitment c;
    c.stage = req<int32_t>(e, what, "stage");
    c.end_layer = req<int64_t>(e, what, "end_layer");
    c.rows = req<int64_t>(e, what, "rows");
    c.draws = req<int64_t>(e, what, "draws");
    const std::pair<const char*, std::span<uint8_t>> fields[] = {
        {"in", c.in}, {"out", c.out}, {"signature", c.signature}};
    for (const auto& [field, bytes] : fields)
      STOA_CHECK(parse_hex(req<std::string>(e, what, field), bytes), ErrorKind::kInvalidArgument,
                 msg, ": stage commitment field '", field, "' is not ", 2 * bytes.size(),
                 " hex digits");
    out.push_back(c);
  }
  return out;
}

}  // namespace
RolloutSubmission rollout_submission_from_json(const json& j) {
  const char* msg = "rollout";
  RolloutSubmission m;
  m.id = req<std::string>(j, msg, "id");
  m.worker_id = req<std::string>(j, msg, "worker_id");
  m.lease_id = req<std::string>(j, msg, "lease_id");
  m.group_id = req<std::string>(j, msg, "group_id");
  m.prompt_id = req<std::string>(j, msg, "prompt_id");
  m.tokens = req<std::vector<int32_t>>(j, msg, "tokens");
  m.mask = req<std::vector<uint8_t>>(j, msg, "mask");
  // JSON has no NaN/Inf: a worker that produced one sends null, which we read as NaN so that
  // validation rejects it with the right reason rather than as a type error.
  auto lp = req<json>(j, msg, "logprobs");
  STOA_CHECK(lp.is_array(), ErrorKind::kInvalidArgument, msg, ": field 'logprobs' is not an array");
  m.logprobs.reserve(lp.size());
  for (const auto& v : lp) {
    if (v.is_null()) {
      m.logprobs.push_back(std::nanf(""));
    } else {
      STOA_CHECK(v.is_number(), ErrorKind::kInvalidArgument, msg,
                 ": field 'logprobs' holds a non-number");
      m.logprobs.push_back(v.get<float>());
    }
  }
  m.versions = req<std::vector<uint64_t>>(j, msg, "versions");
  m.topk = opt<int32_t>(j, msg, "topk", 0);
  m.topk_ids = opt<std::vector<int32_t>>(j, msg, "topk_ids", {});
  m.topk_logprobs = opt<std::vector<float>>(j, msg, "topk_logprobs", {});
  m.answer = opt<std::string>(j, msg, "answer", "");
  m.turns = opt<int32_t>(j, msg, "turns", 0);
  auto t = opt<json>(j, msg, "timings", json::object());
  m.timings.generate_ms = opt<double>(t, "rollout timings", "generate_ms", 0);
  m.timings.tool_ms = opt<double>(t, "rollout timings", "tool_ms", 0);
  m.timings.started_unix_ms = opt<int64_t>(t, "rollout timings", "started_unix_ms", 0);
  m.timings.finished_unix_ms = opt<int64_t>(t, "rollout timings", "finished_unix_ms", 0);
  if (j.contains("seed")) m.seed = req<uint64_t>(j, msg, "seed");
  m.kernel_target = opt<std::string>(j, msg, "kernel_target", "");
  if (j.contains("prompt_version")) m.prompt_version = req<uint64_t>(j, msg, "prompt_version");
  m.arithmetic = arithmetic_field(j, msg);
  m.pipeline_group = opt<uint64_t>(j, msg, "pipeline_group", 0);
  if (m.pipeline_group != 0) m.stage_commitments = stage_commitments_from_json(j, msg);
  validate_structure(m);
  return m;
}

json to_json(const RolloutResponse& m) {
  json j = {{"status", intake_status_name(m.status)}, {"reward", m.reward}};
  if (!m.reason.empty()) j["reason"] = m.reason;
  if (!m.detail.empty()) j["detail"] = m.detail;
  if (m.status == IntakeStatus::kRejected) j["error"] = m.reason + ": " + m.detail;
  return j;
}
RolloutResponse rollout_response_from_json(const json& j) {
  const char* msg = "rollout response";
  RolloutResponse m;
  auto s = req<std::string>(j, msg, "status");
  if (s == "accepted") {
    m.status = IntakeStatus::kAccepted;
  } else if (s == "duplicate") {
    m.status = IntakeStatus::kDuplicate;
  } else if (s == "rejected") {
    m.status = IntakeStatus::kRejected;
  } else {
    fail(ErrorKind::kInvalidArgument, msg, ": unknown status '", s, "'");
  }
  m.reason = opt<std::string>(j, msg, "reason", "");
  m.detail = opt<std::string>(j, msg, "detail", "");
  m.reward = opt<double>(j, msg, "reward", 0);
  return m;
}

json parse_body(const std::string& body, const std::string& what) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  STOA_CHECK(!j.is_discarded(), ErrorKind::kInvalidArgument, what, ": malformed JSON body (",
             body.size(), " bytes)");
  STOA_CHECK(j.is_object(), ErrorKind::kInvalidArgument, what, ": the body is JSON ", j.type_name(),
             ", expected an object");
  return j;
}

void validate_structure(const RolloutSubmission& m) {
  const std::string who = cat("rollout '", m.id, "'");
  STOA_CHECK(looks_like_uuid(m.id), ErrorKind::kInvalidArgument, who, ": id is not a UUID");
  STOA_CHECK(
      !m.worker_id.empty() && !m.lease_id.empty() && !m.group_id.empty() && !m.prompt_id.empty(),
      ErrorKind::kInvalidArgument, who,
      ": worker_id, lease_id, group_id and prompt_id "
      "must be non-empty");
  const size_t n = m.tokens.size();
  STOA_CHECK(n > 0, ErrorKind::kInvalidArgument, who, ": no tokens");
  STOA_CHECK(m.mask.size() == n && m.logprobs.size() == n && m.versions.size() == n,
             ErrorKind::kInvalidArgument, who, ": ", n, " tokens but ", m.mask.size(), " mask, ",
             m.logprobs.size(), " logprobs and ", m.versions.size(), " versions");
  for (size_t t = 0; t < n; ++t) {
    STOA_CHECK(m.mask[t] <= 1, ErrorKind::kInvalidArgument, who, ": mask[", t,
               "] = ", int(m.mask[t]), " is neither 0 nor 1");
  }
  STOA_CHECK(
      m.pipeline_group == 0 ? m.stage_commitments.empty() : m.stage_commitments.size() >= 2,
      ErrorKind::kInvalidArgument, who, ": ", m.stage_commitments.size(), " stage commitments for ",
      m.pipeline_group == 0 ? "a rollout of no pipeline group" : "a pipeline group's rollout");
  STOA_CHECK(m.topk >= 0 && m.topk <= 64, ErrorKind::kInvalidArgument, who, ": topk ", m.topk,
             " outside [0, 64]");
  const size_t k = static_cast<size_t>(m.topk);
  STOA_CHECK(m.topk_ids.size() == n * k && m.topk_logprobs.size() == n * k,
             ErrorKind::kInvalidArgument, who, ": top-K arrays must hold tokens * topk = ", n * k,
             " values (got ", m.topk_ids.size(), " ids, ", m.topk_logprobs.size(), " logprobs)");
}

namespace {
void random_bytes(uint8_t* out, size_t n) {
  STOA_CHECK(RAND_bytes(out, static_cast<int>(n)) == 1, ErrorKind::kInternal,
             "OpenSSL RAND_bytes failed");
}
std::string to_hex(const uint8_t* b, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[b[i] >> 4];
    s += digits[b[i] & 15];
  }
  return s;
}
}  // namespace

std::string random_uuid() {
  uint8_t b[16];
  random_bytes(b, 16);
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);
  std::string h = to_hex(b, 16);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

std::string random_token() {
  uint8_t b[16];
  random_bytes(b, 16);
  return to_hex(b, 16);
}

bool looks_like_uuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    char c = s[i];
    if (dash ? c != '-' : !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace stoa::net
