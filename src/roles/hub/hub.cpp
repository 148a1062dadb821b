#include "roles/hub/hub.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "core/log.h"
#include "core/rng.h"
#include "env/episode.h"
#include "roles/hub/hub_counters.h"

namespace stoa::hub {

using nlohmann::json;

uint64_t AcceptedGroup::min_version() const {
  uint64_t m = UINT64_MAX;
  for (const auto& r : rollouts) m = std::min(m, r.min_version);
  return rollouts.empty() ? 0 : m;
}

namespace {
int64_t system_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Hub::Hub(HubConfig config, HubDeps deps)
    : config_(std::move(config)), deps_(std::move(deps)), counters_(std::make_unique<Counters>()) {
  STOA_CHECK(deps_.task && deps_.codec && deps_.store, ErrorKind::kInvalidArgument,
             "hub: task, codec and blob store are required");
  STOA_CHECK(!config_.join_token.empty(), ErrorKind::kInvalidArgument,
             "hub: a join token is required");
  STOA_CHECK(!deps_.prompts.empty(), ErrorKind::kInvalidArgument, "hub: no training prompts");
  STOA_CHECK(config_.group_size > 0 && deps_.vocab_size > 0, ErrorKind::kInvalidArgument,
             "hub: group_size and vocab_size must be positive");
  if (!deps_.clock_ms) deps_.clock_ms = system_ms;
  counters_->start_ms = now();
  // A fixed shuffle of the prompts (seeded): the cursor into it is persisted, so a restarted hub
  // continues where it stopped instead of replaying the first prompts. Rng's shuffle is the same
  // with every standard library (std::shuffle's algorithm is implementation-defined).
  prompt_order_.resize(deps_.prompts.size());
  std::iota(prompt_order_.begin(), prompt_order_.end(), 0);
  Rng(config_.seed, 0).shuffle(prompt_order_);
  ledger_ = std::make_unique<Ledger>(config_.ledger_path);
  restore();
}

Hub::~Hub() {
  stop();
}

void Hub::restore() {
  for (const auto& w : ledger_->workers()) {
    WorkerStats s;
    s.id = w.id;
    s.name = w.name;
    s.last_seen_ms = w.last_seen_ms;
    workers_[w.id] = s;
    sessions_[w.session_token] = w.id;
  }
  for (const auto& g : ledger_->groups()) {
    groups_[g.id] = GroupState{g, 0, {}};
    group_order_.push_back(g.id);
  }
  for (const auto& l : ledger_->leases(false)) leases_[l.id] = l;
  // Per-lease counts come from the rollouts themselves (the source of truth).
  for (const auto& [gid, n] : ledger_->rollout_counts()) {
    auto it = groups_.find(gid);
    if (it == groups_.end()) continue;
    it->second.accepted = n;
    for (const auto& r : ledger_->rollouts_of_group(gid)) {
      it->second.accepted_by_lease[r.lease_id]++;
      if (workers_.count(r.worker_id)) workers_[r.worker_id].rollouts_accepted++;
    }
  }
  counters_->accepted = ledger_->rollout_count();
  for (const auto& v : ledger_->versions()) versions_[v.version] = v;
  if (auto m = ledger_->meta("next_prompt")) next_prompt_ = std::stoll(*m);
  for (const auto& [id, g] : groups_) {
    if (g.row.status == GroupStatus::kTrained) counters_->groups_trained++;
    if (g.row.status == GroupStatus::kDropped) counters_->dropped[g.row.drop_reason]++;
  }
  reload_catalog_locked();
}

void Hub::reload_catalog_locked() {
  std::string path = deps_.store->dir() + "/catalog.json";
  if (std::filesystem::exists(path)) {
    catalog_ = pulse::Catalog::load(path);
  } else {
    catalog_ = pulse::Catalog::scan(*deps_.store);
  }
}

// ---------------------------------------------------------------- join / auth

net::JoinResponse Hub::join(const std::string& bearer, const net::JoinRequest& request) {
  if (bearer != config_.join_token) throw RequestError(401, "join: invalid join token");
  std::lock_guard<std::mutex> lock(mutex_);
  WorkerRow row;
  if (!request.resume_id.empty() && workers_.count(request.resume_id)) {
    row.id = request.resume_id;
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      it = it->second == row.id ? sessions_.erase(it) : std::next(it);
    }
  } else {
    row.id = "w-" + net::random_token().substr(0, 12);
  }
  row.name = request.name.empty() ? row.id : request.name;
  row.session_token = net::random_token();
  row.joined_ms = now();
  row.last_seen_ms = row.joined_ms;
  ledger_->put_worker(row);
  sessions_[row.session_token] = row.id;
  auto& w = workers_[row.id];
  w.id = row.id;
  w.name = row.name;
  w.last_seen_ms = row.last_seen_ms;
  net::JoinResponse resp;
  resp.worker_id = row.id;
  resp.session_token = row.session_token;
  resp.heartbeat_interval_s = config_.heartbeat_interval_s;
  resp.vocab_size = deps_.vocab_size;
  resp.max_tokens = config_.max_tokens;
  resp.topk = config_.topk;
  resp.task = deps_.task->name();
  log_info("hub", "worker ", row.id, " (", row.name, ") joined");
  return resp;
}

std::string Hub::authenticate(const std::string& bearer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sessions_.find(bearer);
  if (bearer.empty() || it == sessions_.end()) {
    throw RequestError(401, "unknown or missing session token (join first)");
  }
  return it->second;
}

// ---------------------------------------------------------------- versions

net::VersionInfo Hub::version_info_locked(std::optional<uint64_t> after) const {
  net::VersionInfo info;
  info.max_staleness = config_.max_staleness;
  auto latest = catalog_.latest_version();
  if (!versions_.empty() && (!latest || versions_.rbegin()->first > *latest)) {
    latest = versions_.rbegin()->first;
  }
  if (!latest) return info;
  info.version = latest;
  if (auto it = versions_.find(*latest); it != versions_.end())
    info.state_hash = it->second.state_hash;
  if (after && *after >= *latest) return info;
  std::vector<pulse::CatalogEntry> route;
  try {
    route = catalog_.plan(after, *latest);
  } catch (const Error&) {
    // No patch route from the worker's version (older than the retention): restart from an
    // anchor. If even that fails (the version's blobs are not in the store — only in tests that
    // publish bare versions), the worker gets the version with no blobs and polls again.
    try {
      route = catalog_.plan(std::nullopt, *latest);
    } catch (const Error&) {
      route.clear();
    }
  }
  for (const auto& e : route) {
    info.blobs.push_back({e.kind == pulse::BlobKind::kAnchor ? "anchor" : "patch", e.from_version,
                          e.to_version, e.hash.hex(), e.bytes});
  }
  return info;
}

net::VersionInfo Hub::version_info(std::optional<uint64_t> after) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return version_info_locked(after);
}

net::VersionInfo Hub::wait_version(std::optional<uint64_t> after,
                                   std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto newer = [&] {
    if (stopped_) return true;
    if (!after) return true;
    auto info = version_info_locked(after);
    return info.version && *info.version > *after;
  };
  version_cv_.wait_for(lock, timeout, newer);
  return version_info_locked(after);
}

std::optional<uint64_t> Hub::latest_version() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return version_info_locked(std::nullopt).version;
}

void Hub::publish_version(const pulse::Published& published, const Hash128& state_hash) {
  std::lock_guard<std::mutex> lock(mutex_);
  VersionRow row;
  row.version = published.version;
  row.state_hash = state_hash.hex();
  row.published_ms = now();
  json blobs = json::array();
  for (const auto* e : {&published.patch, &published.anchor}) {
    if (!*e) continue;
    blobs.push_back({{"kind", pulse::blob_kind_name((*e)->kind)},
                     {"from_version", (*e)->from_version},
                     {"to_version", (*e)->to_version},
                     {"hash", (*e)->hash.hex()},
                     {"bytes", (*e)->bytes}});
  }
  row.blobs_json = blobs.dump();
  ledger_->put_version(row);
  versions_[row.version] = row;
  reload_catalog_locked();
  version_cv_.notify_all();
}

// ---------------------------------------------------------------- leases

const std::vector<int32_t>& Hub::prompt_tokens_locked(int64_t prompt_index) {
  auto it = prompt_cache_.find(prompt_index);
  if (it != prompt_cache_.end()) return it->second;
  env::EpisodeConfig ec;
  ec.max_turns = config_.sampling.max_turns;
  ec.max_observation_tokens = config_.sampling.max_observation_tokens;
  env::Episode ep(*deps_.task, deps_.prompts.at(static_cast<size_t>(prompt_index)), *deps_.codec,
                  ec);
  return prompt_cache_[prompt_index] = ep.tokens();
}

void Hub::expire_locked(int64_t now_ms) {
  for (auto& [id, l] : leases_) {
    if (l.state == LeaseState::kOpen && l.deadline_ms < now_ms) {
      l.state = LeaseState::kExpired;
      ledger_->put_lease(l);
      counters_->leases_expired++;
      log_info("hub", "lease ", id, " of worker ", l.worker_id, " expired; its group ", l.group_id,
               " will be reissued");
    }
  }
}

void Hub::expire_leases() {
  std::lock_guard<std::mutex> lock(mutex_);
  expire_locked(now());
}

size_t Hub::queued_groups_locked() const {
  size_t n = 0;
  for (const auto& [id, g] : groups_) n += g.row.status == GroupStatus::kComplete;
  return n;
}

net::Lease Hub::make_lease_locked(GroupState& g, const std::string& worker_id, int32_t samples,
                                  int64_t now_ms) {
  LeaseRow l;
  l.id = "l-" + net::random_token().substr(0, 16);
  l.group_id = g.row.id;
  l.worker_id = worker_id;
  l.samples = samples;
  l.issued_ms = now_ms;
  l.deadline_ms = now_ms + config_.lease_ttl_ms;
  l.max_deadline_ms = now_ms + std::max(config_.lease_max_ms, config_.lease_ttl_ms);
  l.issued_at_version = version_info_locked(std::nullopt).version.value_or(0);
  ledger_->put_lease(l);
  leases_[l.id] = l;
  counters_->leases_issued++;
  const auto& problem = deps_.prompts.at(static_cast<size_t>(g.row.prompt_index));
  net::Lease out;
  out.lease_id = l.id;
  out.group_id = g.row.id;
  out.prompt_id = g.row.prompt_id;
  out.question = problem.question;
  out.prompt_tokens = prompt_tokens_locked(g.row.prompt_index);
  out.samples = samples;
  out.sampling = config_.sampling;
  out.deadline_unix_ms = l.deadline_ms;
  out.issued_at_version = l.issued_at_version;
  return out;
}

std::optional<net::Lease> Hub::lease_locked(const std::string& worker_id, int64_t now_ms) {
  expire_locked(now_ms);
  // 1. A group whose samples are not all accounted for (an expired/released lease, or rollouts
  //    rejected): reissue what is missing, oldest group first.
  size_t open_groups = 0;
  for (const auto& gid : group_order_) {
    auto& g = groups_.at(gid);
    if (g.row.status != GroupStatus::kOpen) continue;
    ++open_groups;
    int64_t outstanding = 0;
    for (const auto& [lid, l] : leases_) {
      if (l.group_id != gid || l.state != LeaseState::kOpen) continue;
      auto it = g.accepted_by_lease.find(lid);
      int64_t got = it == g.accepted_by_lease.end() ? 0 : it->second;
      outstanding += std::max<int64_t>(0, l.samples - got);
    }
    int64_t needed = g.row.samples - g.accepted - outstanding;
    if (needed > 0) return make_lease_locked(g, worker_id, static_cast<int32_t>(needed), now_ms);
  }
  // 2. A new group, unless enough are out or the trainer is behind (back-pressure: rollouts
  //    sampled now would only go stale in the queue).
  if (open_groups >= config_.max_open_groups ||
      queued_groups_locked() >= config_.max_queued_groups) {
    return std::nullopt;
  }
  // A prompt that leaves no room in the transcript (max_tokens) cannot be sampled by any worker:
  // skip it rather than hand it out (found with a byte-level codec, whose prompts are long).
  int64_t n = static_cast<int64_t>(prompt_order_.size());
  int64_t index = -1;
  for (int64_t tries = 0; tries < n; ++tries) {
    const int64_t candidate = prompt_order_[static_cast<size_t>(next_prompt_ % n)];
    const auto len = static_cast<int64_t>(prompt_tokens_locked(candidate).size());
    if (len < config_.max_tokens) {
      index = candidate;
      break;
    }
    if (counters_->prompts_too_long.insert(candidate).second)
      log_warn("hub", "prompt '", deps_.prompts[static_cast<size_t>(candidate)].id, "' renders to ",
               len, " tokens, not under max_tokens = ", config_.max_tokens, ": skipped");
    ++next_prompt_;
  }
  if (index < 0) {
    if (counters_->prompts_too_long.size() == static_cast<size_t>(n) && !counters_->all_too_long) {
      counters_->all_too_long = true;
      log_error("hub", "every training prompt is at least max_tokens = ", config_.max_tokens,
                " tokens long: no work can be leased (raise [hub] max_tokens)");
    }
    return std::nullopt;
  }
  GroupRow row;
  row.id = "g-" + std::to_string(next_prompt_) + "-" + net::random_token().substr(0, 8);
  row.prompt_id = deps_.prompts[static_cast<size_t>(index)].id;
  row.prompt_index = index;
  row.samples = config_.group_size;
  row.created_ms = now_ms;
  ledger_->transaction([&] {
    ledger_->put_group(row);
    ledger_->set_meta("next_prompt", std::to_string(next_prompt_ + 1));
  });
  ++next_prompt_;
  groups_[row.id] = GroupState{row, 0, {}};
  group_order_.push_back(row.id);
  return make_lease_locked(groups_.at(row.id), worker_id, row.samples, now_ms);
}

net::LeaseResponse Hub::lease(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  net::LeaseResponse resp;
  if (stopped_) {
    resp.retry_after_ms = config_.no_work_retry_ms;
    return resp;
  }
  resp.lease = lease_locked(worker_id, now());
  if (!resp.lease) resp.retry_after_ms = config_.no_work_retry_ms;
  return resp;
}

void Hub::release(const std::string& worker_id, const std::string& lease_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) throw RequestError(404, cat("release: unknown lease '", lease_id, "'"));
  if (it->second.worker_id != worker_id) {
    throw RequestError(409, cat("release: lease '", lease_id, "' is not yours"));
  }
  if (it->second.state == LeaseState::kOpen) {
    it->second.state = LeaseState::kReleased;
    ledger_->put_lease(it->second);
    counters_->leases_released++;
  }
}

net::HeartbeatResponse Hub::heartbeat(const std::string& caller, const net::Heartbeat& hb) {
  if (hb.worker_id != caller) {
    throw RequestError(403, cat("heartbeat: worker_id '", hb.worker_id,
                                "' does not match the session token's worker"));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t t = now();
  expire_locked(t);
  auto& w = workers_[caller];
  w.last_seen_ms = t;
  w.version = hb.version;
  w.tokens_generated = hb.tokens_generated;
  w.tokens_per_s = hb.tokens_per_s;
  w.idle_fraction = hb.idle_fraction;
  w.download = hb.download;
  ledger_->touch_worker(caller, t);
  net::HeartbeatResponse resp;
  resp.latest_version = version_info_locked(std::nullopt).version;
  for (const auto& lid : hb.leases) {
    auto it = leases_.find(lid);
    if (it == leases_.end() || it->second.worker_id != caller) continue;
    auto& l = it->second;
    auto g = groups_.find(l.group_id);
    bool closed = g == groups_.end() || g->second.row.status != GroupStatus::kOpen;
    if (closed || l.state == LeaseState::kReleased || l.state == LeaseState::kDone) {
      resp.cancelled.push_back(lid);
    } else if (l.state == LeaseState::kOpen) {
      l.deadline_ms = std::min(t + config_.lease_ttl_ms, l.max_deadline_ms);
      ledger_->put_lease(l);
      resp.renewed.push_back(lid);
    }
    // An expired lease is neither: its late results may still count (docs/protocol.md).
  }
  return resp;
}

}  // namespace stoa::hub
