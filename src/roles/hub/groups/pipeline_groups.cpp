#include "roles/hub/groups/pipeline_groups.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "model/memory_need.h"
#include "net/protocol.h"

namespace stoa::hub {

PipelineGroups::PipelineGroups(ModelConfig config, PipelineGroupOptions options)
    : config_(std::move(config)),
      options_(options),
      // Below 2^48 (ids pass through JSON readers that hold doubles), a million groups apart.
      next_group_((std::stoull(net::random_token().substr(0, 7), nullptr, 16) << 20) + 1) {
  STOA_CHECK(options_.max_stages >= 2 && options_.member_timeout_ms > 0,
             ErrorKind::kInvalidArgument, "pipeline groups need 2 or more stages and a timeout");
}

std::optional<PipelineMemberPlace> PipelineGroups::place(
    const std::string& worker, uint64_t memory_bytes, const std::string& address, int64_t now_ms,
    bool relayed, const PipelineMemberReport& report, const std::string& commit_key) {
  std::lock_guard<std::mutex> lock(mu_);
  expire_locked(now_ms);
  auto it = members_.find(worker);
  if (it == members_.end()) {
    STOA_CHECK(members_.size() < options_.max_waiting, ErrorKind::kInvalidArgument, "the hub has ",
               members_.size(), " workers waiting for pipeline groups already");
    it = members_.emplace(worker, Member{}).first;
  }
  Member& m = it->second;
  m.seen_ms = now_ms;
  if (m.group_id != 0 && (m.memory_bytes != memory_bytes || m.address != address ||
                          m.relayed != relayed || m.commit_key != commit_key))
    dissolve_locked(m.group_id);  // a member that came back otherwise: its place is gone
  m.commit_key = commit_key;
  m.memory_bytes = memory_bytes;
  m.address = address;
  m.relayed = relayed;
  if (m.group_id != 0 && report.group_id == m.group_id) {
    m.report = report;
    if (m.stage == 0) take_breaks_locked(m.group_id, report.breaks, now_ms);
  }
  if (m.group_id == 0) form_locked(now_ms);
  if (m.group_id == 0) return std::nullopt;
  return place_of_locked(worker);
}

void PipelineGroups::leave(const std::string& worker) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = members_.find(worker);
  if (it == members_.end()) return;
  if (it->second.group_id != 0) dissolve_locked(it->second.group_id);
  members_.erase(worker);
}

void PipelineGroups::expire_locked(int64_t now_ms) {
  std::vector<std::string> gone;
  for (const auto& [id, m] : members_)
    if (now_ms - m.seen_ms > options_.member_timeout_ms) gone.push_back(id);
  for (const std::string& id : gone) {
    if (members_.at(id).group_id != 0) dissolve_locked(members_.at(id).group_id);
    members_.erase(id);
  }
  std::erase_if(benched_, [now_ms](const auto& kv) { return kv.second <= now_ms; });
}

void PipelineGroups::take_breaks_locked(uint64_t group_id, int64_t breaks, int64_t now_ms) {
  Group& g = groups_.at(group_id);
  // A count that rose by n is n breaks now (at most the limit: one ask may bring many).
  for (int64_t n = std::min(breaks - g.breaks_seen, options_.max_breaks); n > 0; --n)
    g.break_times.push_back(now_ms);
  g.breaks_seen = std::max(g.breaks_seen, breaks);
  std::erase_if(g.break_times, [&](int64_t t) { return now_ms - t > options_.break_window_ms; });
  if (static_cast<int64_t>(g.break_times.size()) < options_.max_breaks) return;
  const std::string& at_fault = g.members[static_cast<size_t>(stage_at_fault_locked(g))];
  benched_[at_fault] = now_ms + options_.bench_ms;
  ++broken_;
  dissolve_locked(group_id);
}

int PipelineGroups::stage_at_fault_locked(const Group& g) const {
  const PipelineMemberReport& head = members_.at(g.members.front()).report;
  if (head.fault_stage >= 1 && head.fault_stage < g.stages) return head.fault_stage;
  // A stall or a dead member fails the stage before it first, and that one's upstream after.
  for (int s = g.stages - 2; s >= 1; --s) {
    auto m = members_.find(g.members[static_cast<size_t>(s)]);
    if (m != members_.end() && m->second.report.next_failures > 0) return s + 1;
  }
  return 1;
}

void PipelineGroups::dissolve_locked(uint64_t group_id) {
  auto g = groups_.find(group_id);
  if (g == groups_.end()) return;
  for (const std::string& id : g->second.members) {
    auto m = members_.find(id);
    if (m == members_.end()) continue;
    m->second.group_id = 0;
    m->second.report = {};
  }
  groups_.erase(g);
  ++dissolved_;
}

// The fewest stages whose spans fit the waiting workers with the most memory, the largest span
// to the largest memory; again while the rest can form another group.
void PipelineGroups::form_locked(int64_t now_ms) {
  while (true) {
    std::vector<std::pair<uint64_t, std::string>> waiting;  // memory, worker
    for (const auto& [id, m] : members_) {
      auto bench = benched_.find(id);
      if (m.group_id == 0 && (bench == benched_.end() || bench->second <= now_ms))
        waiting.emplace_back(m.memory_bytes, id);
    }
    std::sort(waiting.begin(), waiting.end(), std::greater<>());
    const int most = static_cast<int>(std::min<int64_t>(
        {static_cast<int64_t>(waiting.size()), options_.max_stages, config_.num_layers}));
    bool formed = false;
    for (int k = 2; k <= most && !formed; ++k) {
      const std::vector<LayerSpan> spans = split_layers(config_, k);
      std::vector<std::pair<uint64_t, int>> needs;  // need, stage
      for (int s = 0; s < k; ++s)
        needs.emplace_back(memory_needed(config_, spans[static_cast<size_t>(s)]).total(), s);
      std::sort(needs.begin(), needs.end(), std::greater<>());
      bool fits = true;
      for (int i = 0; i < k && fits; ++i)
        fits = waiting[static_cast<size_t>(i)].first >= needs[static_cast<size_t>(i)].first;
      if (!fits) continue;
      Group g;
      g.stages = k;
      g.members.resize(static_cast<size_t>(k));
      g.serve_keys.resize(static_cast<size_t>(k));
      g.commit_keys.resize(static_cast<size_t>(k));
      const uint64_t id = next_group_++;
      for (int i = 0; i < k; ++i) {
        const std::string& worker = waiting[static_cast<size_t>(i)].second;
        const int stage = needs[static_cast<size_t>(i)].second;
        g.members[static_cast<size_t>(stage)] = worker;
        Member& m = members_.at(worker);
        m.group_id = id;
        m.stage = stage;
        // The head is dialled by nobody; a relayed stage after it is joined under a fresh key.
        if (stage > 0 && m.relayed) g.serve_keys[static_cast<size_t>(stage)] = net::random_token();
        g.commit_keys[static_cast<size_t>(stage)] = m.commit_key;
      }
      GroupSigners signers{g.members, std::vector<PublicKey>(static_cast<size_t>(k))};
      for (int s = 0; s < k; ++s)  // unparseable or absent (a test's member): signs nothing
        (void)parse_hex(g.commit_keys[static_cast<size_t>(s)],
                        signers.keys[static_cast<size_t>(s)]);
      signers_[id] = std::move(signers);
      while (signers_.size() > kSignersKept) signers_.erase(signers_.begin());  // the oldest
      groups_.emplace(id, std::move(g));
      ++formed_;
      formed = true;
    }
    if (!formed) return;
  }
}

PipelineMemberPlace PipelineGroups::place_of_locked(const std::string& worker) const {
  const Member& m = members_.at(worker);
  const Group& g = groups_.at(m.group_id);
  PipelineMemberPlace p;
  p.group_id = m.group_id;
  p.stage = m.stage;
  p.stages = g.stages;
  p.span = split_layers(config_, g.stages)[static_cast<size_t>(m.stage)];
  p.serve_key = g.serve_keys[static_cast<size_t>(m.stage)];
  p.stage_keys = g.commit_keys;
  if (m.stage + 1 < g.stages) {
    p.next_key = g.serve_keys[static_cast<size_t>(m.stage + 1)];
    if (p.next_key.empty())
      p.next = members_.at(g.members[static_cast<size_t>(m.stage + 1)]).address;
  }
  return p;
}

std::optional<GroupSigners> PipelineGroups::signers(uint64_t group_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = signers_.find(group_id);
  if (it == signers_.end()) return std::nullopt;
  return it->second;
}

size_t PipelineGroups::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(std::count_if(members_.begin(), members_.end(),
                                           [](const auto& kv) { return kv.second.group_id == 0; }));
}

size_t PipelineGroups::groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_.size();
}

uint64_t PipelineGroups::groups_formed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return formed_;
}

uint64_t PipelineGroups::groups_dissolved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dissolved_;
}

uint64_t PipelineGroups::groups_broken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

size_t PipelineGroups::benched(int64_t now_ms) const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(std::count_if(benched_.begin(), benched_.end(),
                                           [&](const auto& kv) { return kv.second > now_ms; }));
}

}  // namespace stoa::hub
