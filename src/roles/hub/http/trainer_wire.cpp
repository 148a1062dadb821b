// JSON of the trainer routes (trainer_wire.h). Token arrays travel as JSON arrays: a step's
// groups are a few hundred kilobytes, far under the hub's body limit, and need no second codec.
#include "roles/hub/http/trainer_wire.h"

#include "core/error.h"

namespace stoa::hub {

using nlohmann::json;

namespace {

// Parses with `fn`, turning nlohmann's type and key errors into kInvalidArgument (a 400).
template <typename Fn>
auto parse_checked(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const json::exception& e) {
    fail(ErrorKind::kInvalidArgument, what, ": malformed body: ", e.what());
  }
}

Hash128 hash_field(const json& j, const char* key) {
  Hash128 h;
  STOA_CHECK(Hash128::parse(j.at(key).get<std::string>(), &h), ErrorKind::kInvalidArgument, "'",
             key, "' is not 32 hex digits");
  return h;
}

json entry_json(const pulse::CatalogEntry& e) {
  return {{"kind", pulse::blob_kind_name(e.kind)},
          {"from", e.from_version},
          {"to", e.to_version},
          {"hash", e.hash.hex()},
          {"bytes", e.bytes}};
}

pulse::CatalogEntry entry_from_json(const json& j) {
  pulse::CatalogEntry e;
  const std::string kind = j.at("kind").get<std::string>();
  STOA_CHECK(kind == "patch" || kind == "anchor", ErrorKind::kInvalidArgument,
             "unknown blob kind '", kind, "'");
  e.kind = kind == "patch" ? pulse::BlobKind::kPatch : pulse::BlobKind::kAnchor;
  e.from_version = j.at("from").get<uint64_t>();
  e.to_version = j.at("to").get<uint64_t>();
  e.hash = hash_field(j, "hash");
  e.bytes = j.at("bytes").get<uint64_t>();
  return e;
}

}  // namespace

json to_json(const AcceptedGroup& group) {
  json rollouts = json::array();
  for (const auto& r : group.rollouts) {
    rollouts.push_back({{"id", r.id},
                        {"worker_id", r.worker_id},
                        {"tokens", r.tokens},
                        {"mask", r.mask},
                        {"logprobs", r.logprobs},
                        {"versions", r.versions},
                        {"topk", r.topk},
                        {"topk_ids", r.topk_ids},
                        {"topk_logprobs", r.topk_logprobs},
                        {"reward", r.reward},
                        {"min_version", r.min_version},
                        {"max_version", r.max_version}});
  }
  return {{"group_id", group.group_id}, {"prompt_id", group.prompt_id}, {"rollouts", rollouts}};
}

AcceptedGroup accepted_group_from_json(const json& j) {
  return parse_checked("group", [&] {
    AcceptedGroup g;
    g.group_id = j.at("group_id").get<std::string>();
    g.prompt_id = j.at("prompt_id").get<std::string>();
    for (const auto& rj : j.at("rollouts")) {
      AcceptedRollout r;
      r.id = rj.at("id").get<std::string>();
      r.worker_id = rj.at("worker_id").get<std::string>();
      r.tokens = rj.at("tokens").get<std::vector<int32_t>>();
      r.mask = rj.at("mask").get<std::vector<uint8_t>>();
      r.logprobs = rj.at("logprobs").get<std::vector<float>>();
      r.versions = rj.at("versions").get<std::vector<uint64_t>>();
      r.topk = rj.at("topk").get<int32_t>();
      r.topk_ids = rj.at("topk_ids").get<std::vector<int32_t>>();
      r.topk_logprobs = rj.at("topk_logprobs").get<std::vector<float>>();
      r.reward = rj.at("reward").get<double>();
      r.min_version = rj.at("min_version").get<uint64_t>();
      r.max_version = rj.at("max_version").get<uint64_t>();
      // The trainer indexes mask, logprobs and versions by token: unequal lengths are refused
      // here rather than read out of bounds there.
      STOA_CHECK(r.mask.size() == r.tokens.size() && r.logprobs.size() == r.tokens.size() &&
                     r.versions.size() == r.tokens.size(),
                 ErrorKind::kInvalidArgument, "group '", g.group_id, "': rollout '", r.id, "' has ",
                 r.tokens.size(), " tokens but ", r.mask.size(), " mask, ", r.logprobs.size(),
                 " logprobs and ", r.versions.size(), " versions");
      g.rollouts.push_back(std::move(r));
    }
    return g;
  });
}

json to_json(const StepReport& report) {
  return {{"step", report.step},
          {"step_seconds", report.step_seconds},
          {"busy_fraction", report.busy_fraction},
          {"masked_fraction", report.masked_fraction},
          {"tv", report.tv},
          {"kl", report.kl},
          {"reward_mean", report.reward_mean},
          {"loss", report.loss},
          {"groups", report.groups},
          {"groups_uniform", report.groups_uniform},
          {"tokens", report.tokens},
          {"extra", report.extra}};
}

StepReport step_report_from_json(const json& j) {
  return parse_checked("step report", [&] {
    StepReport r;
    r.step = j.at("step").get<int64_t>();
    STOA_CHECK(r.step >= 1, ErrorKind::kInvalidArgument, "step report: step ", r.step,
               " is not >= 1");
    r.step_seconds = j.at("step_seconds").get<double>();
    r.busy_fraction = j.at("busy_fraction").get<double>();
    r.masked_fraction = j.at("masked_fraction").get<double>();
    r.tv = j.at("tv").get<double>();
    r.kl = j.at("kl").get<double>();
    r.reward_mean = j.at("reward_mean").get<double>();
    r.loss = j.at("loss").get<double>();
    r.groups = j.at("groups").get<int64_t>();
    r.tokens = j.at("tokens").get<int64_t>();
    // Absent from a trainer built before it was reported: read as no uniform group.
    r.groups_uniform = j.value("groups_uniform", int64_t{0});
    if (j.contains("extra")) r.extra = j.at("extra").get<std::map<std::string, double>>();
    return r;
  });
}

json to_json(const PublishedVersion& v) {
  json j = {{"version", v.published.version},
            {"state_hash", v.state_hash.hex()},
            {"catalog", v.catalog.to_json()}};
  if (v.published.patch) j["patch"] = entry_json(*v.published.patch);
  if (v.published.anchor) j["anchor"] = entry_json(*v.published.anchor);
  json pruned = json::array();
  for (const auto& h : v.published.pruned) pruned.push_back(h.hex());
  j["pruned"] = pruned;
  return j;
}

PublishedVersion published_version_from_json(const json& j) {
  return parse_checked("publish", [&] {
    PublishedVersion v;
    v.published.version = j.at("version").get<uint64_t>();
    v.state_hash = hash_field(j, "state_hash");
    if (j.contains("patch")) v.published.patch = entry_from_json(j.at("patch"));
    if (j.contains("anchor")) v.published.anchor = entry_from_json(j.at("anchor"));
    STOA_CHECK(v.published.patch || v.published.anchor, ErrorKind::kInvalidArgument,
               "publish: version ", v.published.version, " names neither a patch nor an anchor");
    for (const auto& h : j.at("pruned")) {
      Hash128 hash;
      STOA_CHECK(Hash128::parse(h.get<std::string>(), &hash), ErrorKind::kInvalidArgument,
                 "publish: a pruned blob name is not 32 hex digits");
      v.published.pruned.push_back(hash);
    }
    try {
      v.catalog = pulse::Catalog::from_json(j.at("catalog"), "publish: catalog");
    } catch (const Error& e) {
      fail(ErrorKind::kInvalidArgument, e.what());
    }
    return v;
  });
}

}  // namespace stoa::hub
