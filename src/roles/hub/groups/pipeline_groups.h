// The hub's pipeline groups (docs/design/pipeline.md, "Pipeline groups"): workers that cannot
// hold the whole model ask for a place (net/pipeline_protocol.h) with the memory they may use and
// the port they serve a stage on. The hub forms a group as soon as the waiting workers hold the
// model between them — the fewest stages K whose spans (split_layers) each fit a member, the
// largest span to the largest memory — and gives each member its place: its stage, its layers,
// and the address of the next stage. Stage 0, the head, leases like any worker.
//
// A member behind NAT (`relayed`) cannot be dialled: the hop into it goes through the hub's stage
// relay (roles/pipeline/stage_relay.h) under a key drawn for that hop — the member serves the
// key, the stage before it dials it — and a new group draws new keys.
//
// Every ask renews a member; a member silent past `member_timeout_ms` (gone, or quarantined: its
// asks are refused before they reach here) dissolves its group, the others going back to the
// waiting workers to be grouped again with whoever is there. A worker's leases are the hub's
// business as always: the head of a dissolved group gives back what it holds (the worker does),
// and a head that died has its leases expire and re-issued.
//
// A group that keeps breaking is dissolved too (docs/design/pipeline.md, "Breaks and
// regrouping"): with every ask the head says how often its pipeline broke in the group and which
// stage the last break named, and each later stage how often the stage after it failed it. At
// `max_breaks` breaks within `break_window_ms` the group goes, and the member at fault is not
// grouped again for `bench_ms`: the stage the head's break named (a refusal names its stage),
// else the one after the deepest stage whose next failed it (a stall or a dead link is seen
// first by the stage before it), else stage 1 (the head's own link failed). The reports are
// taken at the members' word: a liar can keep a neighbour out for one bench at most.
//
// Bounded: at most `max_waiting` workers wait and `max_stages` stages make a group. Thread-safe.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/signing.h"
#include "model/config.h"
#include "model/layer_span.h"

namespace stoa::hub {

struct PipelineGroupOptions {
  int64_t member_timeout_ms = 20'000;  // a member's asks come every few seconds
  size_t max_waiting = 4096;
  int max_stages = 16;
  int64_t max_breaks = 3;  // breaks within the window that dissolve a group
  int64_t break_window_ms = 600'000;
  int64_t bench_ms = 600'000;  // how long the member at fault is not grouped again
};

// What a member says of its group with an ask (net::PipelineGroupReport).
struct PipelineMemberReport {
  uint64_t group_id = 0;      // counts of another group than the member's are stale: ignored
  int64_t breaks = 0;         // the head's, in this group
  int fault_stage = -1;       // the stage the head's last break named; -1: none
  int64_t next_failures = 0;  // a stage's: the stage after it stalled, dropped or was unreachable
};

struct PipelineMemberPlace {
  uint64_t group_id = 0;
  int stage = 0;
  int stages = 0;
  LayerSpan span;
  std::string next;       // host:port of the next stage; empty on the last or when relayed
  std::string serve_key;  // non-empty: serve the stage before through the relay under this key
  std::string next_key;   // non-empty: reach the next stage through the relay under this key
  std::vector<std::string> stage_keys;  // every stage's public commitment key, in stage order
};

// Who a group's stages were and the public keys they sign with: what the hub checks a pipeline
// rollout's chain against at intake and whom its replay's blame names. Kept after the group
// goes, for the last kSignersKept groups (its rollouts may still be in flight or under replay).
struct GroupSigners {
  std::vector<std::string> workers;  // in stage order
  std::vector<PublicKey> keys;       // in stage order
};
using PipelineSigners = std::function<std::optional<GroupSigners>(uint64_t group_id)>;

class PipelineGroups {
 public:
  PipelineGroups(ModelConfig config, PipelineGroupOptions options = {});

  // `worker` asks at `now_ms`, holding `memory_bytes` and serving stages at `address`
  // (host:port): its place, or nullopt while it waits. kInvalidArgument when the waiting room is
  // full (the worker asks again later).
  std::optional<PipelineMemberPlace> place(const std::string& worker, uint64_t memory_bytes,
                                           const std::string& address, int64_t now_ms,
                                           bool relayed = false,
                                           const PipelineMemberReport& report = {},
                                           const std::string& commit_key = "");
  // A worker that left (stopped cleanly, or was forgotten): its group is dissolved.
  void leave(const std::string& worker);
  // The group's stages and keys, while it is formed and for a while after; nullopt when
  // unknown (never formed here, forgotten, or formed before the hub restarted: the keys are
  // drawn anew with every group and live in memory only).
  std::optional<GroupSigners> signers(uint64_t group_id) const;
  static constexpr size_t kSignersKept = 4096;

  size_t waiting() const;
  size_t groups() const;
  uint64_t groups_formed() const;
  uint64_t groups_dissolved() const;
  // Groups dissolved for breaking `max_breaks` times, and members kept out now.
  uint64_t groups_broken() const;
  size_t benched(int64_t now_ms) const;

 private:
  struct Member {
    uint64_t memory_bytes = 0;
    std::string address;
    bool relayed = false;
    std::string commit_key;  // its public key, hex (its asks say it)
    int64_t seen_ms = 0;
    uint64_t group_id = 0;  // 0: waiting
    int stage = 0;
    PipelineMemberReport report;  // the last one of its group
  };
  struct Group {
    std::vector<std::string> members;      // in stage order
    std::vector<std::string> serve_keys;   // per stage: the relay key of the hop into it, or ""
    std::vector<std::string> commit_keys;  // per stage: its public key, hex
    int stages = 0;
    int64_t breaks_seen = 0;           // the head's count so far
    std::vector<int64_t> break_times;  // within the window, oldest first
  };
  void expire_locked(int64_t now_ms);
  void dissolve_locked(uint64_t group_id);
  void form_locked(int64_t now_ms);
  // The head said `breaks` at `now_ms`: the group goes at max_breaks within the window.
  void take_breaks_locked(uint64_t group_id, int64_t breaks, int64_t now_ms);
  int stage_at_fault_locked(const Group& g) const;
  PipelineMemberPlace place_of_locked(const std::string& worker) const;

  const ModelConfig config_;
  const PipelineGroupOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Member> members_;
  std::map<uint64_t, Group> groups_;
  std::map<uint64_t, GroupSigners> signers_;  // the last kSignersKept groups formed
  // Random at start: a restarted hub's groups never take the ids of the old one's, whose
  // rollouts still in flight carry chains signed under keys this one never drew.
  uint64_t next_group_;
  uint64_t formed_ = 0;
  uint64_t dissolved_ = 0;
  uint64_t broken_ = 0;
  // Worker → until when it is not grouped; kept apart from members_ so that leaving and coming
  // back does not end it (pruned when it ends).
  std::map<std::string, int64_t> benched_;
};

}  // namespace stoa::hub
