#include "roles/run/run_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string_view>
#include <type_traits>

#include <toml++/toml.h>

#include "core/error.h"
#include "env/tasks/builtin_tasks.h"

namespace stoa::run {
namespace fs = std::filesystem;
namespace {

// Reads typed values out of one [section], remembering which keys were consumed so that the
// leftovers can be reported as unknown.
class Section {
 public:
  Section(const toml::table* table, std::string name, std::string source)
      : table_(table), name_(std::move(name)), source_(std::move(source)) {}

  template <typename T>
  void get(const char* key, T& out) {
    used_.insert(key);
    if (!table_) return;
    const toml::node* node = table_->get(key);
    if (!node) return;
    if constexpr (std::is_same_v<T, std::string>) {
      auto v = node->value<std::string>();
      if (!v) bad(key, "a string");
      out = *v;
    } else if constexpr (std::is_same_v<T, bool>) {
      auto v = node->value<bool>();
      if (!v) bad(key, "a boolean");
      out = *v;
    } else if constexpr (std::is_floating_point_v<T>) {
      auto v = node->value<double>();  // integers convert
      if (!v) bad(key, "a number");
      out = static_cast<T>(*v);
    } else {
      auto v = node->value_exact<int64_t>();
      if (!v) bad(key, "an integer");
      if (*v < 0) bad(key, "a non-negative integer");
      out = static_cast<T>(*v);
    }
  }
  // A duration the file gives in whole seconds (`key` ends in _s) and the config holds in ms.
  void get_seconds_as_ms(const char* key, int64_t& ms) {
    int64_t seconds = ms / 1000;
    get(key, seconds);
    ms = seconds * 1000;
  }
  void check_unknown() const {
    if (!table_) return;
    for (const auto& [k, v] : *table_) {
      const std::string key(k.str());
      STOA_CHECK(used_.count(key), ErrorKind::kInvalidArgument, source_, ": unknown key '", key,
                 "' in [", name_, "]");
    }
  }

 private:
  [[noreturn]] void bad(const char* key, const char* what) const {
    fail(ErrorKind::kInvalidArgument, source_, ": [", name_, "] ", key, " must be ", what);
  }
  const toml::table* table_;
  std::string name_, source_;
  std::set<std::string> used_;
};

// [hub] <limit>_per_s / <limit>_burst: the hub's token buckets (hub::HubLimits).
std::vector<std::pair<std::string, hub::RateLimit*>> rate_limits(hub::HubLimits& l) {
  return {{"join_per_ip", &l.join_per_ip},         {"lease_per_worker", &l.lease_per_worker},
          {"lease_per_ip", &l.lease_per_ip},       {"rollouts_per_worker", &l.rollouts_per_worker},
          {"rollouts_per_ip", &l.rollouts_per_ip}, {"task_per_worker", &l.task_per_worker}};
}

std::string resolve(const std::string& base, const std::string& p) {
  if (p.empty() || fs::path(p).is_absolute() || base.empty()) return p;
  return (fs::path(base) / p).lexically_normal().string();
}

std::string joined_task_names() {
  std::string out;
  for (const auto& n : env::builtin_tasks().names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// [task]: every value as the string the task's options hold (TOML numbers and booleans in
// their TOML spelling); the task's path options resolved against the file's directory.
env::TaskOptions read_task_table(const toml::table* table, const std::string& task,
                                 const std::string& source, const std::string& base_dir) {
  env::TaskOptions options;
  if (!table) return options;
  for (const auto& [k, v] : *table) {
    const std::string key(k.str());
    std::string value;
    if (auto s = v.value_exact<std::string>()) {
      value = *s;
    } else if (auto i = v.value_exact<int64_t>()) {
      value = std::to_string(*i);
    } else if (auto b = v.value_exact<bool>()) {
      value = *b ? "true" : "false";
    } else if (auto d = v.value_exact<double>()) {
      char buf[64];
      value.assign(buf, std::to_chars(buf, buf + sizeof(buf), *d).ptr);
    } else {
      fail(ErrorKind::kInvalidArgument, source, ": [task] ", key,
           " must be a string, a number or a boolean");
    }
    options.set(key, value);
  }
  try {
    const env::TaskRegistry& registry = env::builtin_tasks();
    registry.check_options(task, options);
    for (const auto& key : registry.keys(task).paths)
      if (options.has(key)) options.set(key, resolve(base_dir, options.get(key)));
  } catch (const Error& e) {
    fail(ErrorKind::kInvalidArgument, source, ": ", e.what());
  }
  return options;
}

}  // namespace

RunConfig parse_run_config(const std::string& text, const std::string& source,
                           const std::string& base_dir) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << e.description() << " at line " << e.source().begin.line << ", column "
        << e.source().begin.column;
    fail(ErrorKind::kBadFormat, source, ": invalid TOML: ", msg.str());
  }
  static const std::set<std::string> kSections = {"run",     "task",  "hub",   "sampling",
                                                  "trainer", "pulse", "verify"};
  for (const auto& [k, v] : root) {
    const std::string key(k.str());
    STOA_CHECK(kSections.count(key) && v.is_table(), ErrorKind::kInvalidArgument, source,
               ": unknown section or key '", key,
               "' (expected [run], [task], [hub], [sampling], [trainer], [pulse], [verify]; "
               "docs/run-config.md)");
  }
  RunConfig c;
  c.run_dir = "run";
  c.loop.gather_timeout = std::chrono::milliseconds(2000);

  Section run(root["run"].as_table(), "run", source);
  run.get("dir", c.run_dir);
  run.get("model", c.model_dir);
  run.get("data", c.data_dir);
  run.get("task", c.task);
  run.get("max_steps", c.loop.max_steps);
  run.check_unknown();
  STOA_CHECK(!c.model_dir.empty(), ErrorKind::kInvalidArgument, source,
             ": [run] model is required");
  STOA_CHECK(!c.data_dir.empty(), ErrorKind::kInvalidArgument, source, ": [run] data is required");
  STOA_CHECK(!c.task.empty(), ErrorKind::kInvalidArgument, source,
             ": [run] task is required (known tasks: ", joined_task_names(), ")");
  STOA_CHECK(env::builtin_tasks().contains(c.task), ErrorKind::kInvalidArgument, source,
             ": [run] task '", c.task, "' is not a known task (known tasks: ", joined_task_names(),
             ")");
  c.run_dir = resolve(base_dir, c.run_dir);
  c.model_dir = resolve(base_dir, c.model_dir);
  c.data_dir = resolve(base_dir, c.data_dir);
  c.task_options = read_task_table(root["task"].as_table(), c.task, source, base_dir);

  Section hub(root["hub"].as_table(), "hub", source);
  hub.get("host", c.server.host);
  hub.get("port", c.server.port);
  hub.get("threads", c.server.threads);
  hub.get("header_timeout_s", c.server.header_timeout_s);
  hub.get("body_timeout_s", c.server.body_timeout_s);
  hub.get("idle_timeout_s", c.server.idle_timeout_s);
  hub.get("max_connections_per_ip", c.server.max_connections_per_ip);
  hub.get("tls_cert", c.server.tls_cert_path);
  hub.get("tls_key", c.server.tls_key_path);
  hub.get("join_token", c.hub.join_token);
  hub.get("group_size", c.hub.group_size);
  hub.get_seconds_as_ms("lease_ttl_s", c.hub.lease_ttl_ms);
  hub.get_seconds_as_ms("lease_max_s", c.hub.lease_max_ms);
  hub.get("max_open_groups", c.hub.max_open_groups);
  size_t queued_groups = 0;
  hub.get("max_queued_groups", queued_groups);
  if (root["hub"]["max_queued_groups"]) c.max_queued_groups = queued_groups;
  hub.get("max_tokens", c.hub.max_tokens);
  hub.get("topk", c.hub.topk);
  hub.get("seed", c.hub.seed);
  hub.get("heartbeat_interval_s", c.hub.heartbeat_interval_s);
  hub.get("operator_token", c.hub.operator_token);
  hub.get("trainer_token", c.hub.trainer_token);
  hub.get_seconds_as_ms("session_ttl_s", c.hub.session_ttl_ms);
  hub.get_seconds_as_ms("worker_expiry_s", c.hub.worker_idle_expiry_ms);
  for (auto& [name, limit] : rate_limits(c.hub.limits)) {
    hub.get((name + "_per_s").c_str(), limit->rate_per_s);
    hub.get((name + "_burst").c_str(), limit->burst);
  }
  hub.get("max_leases_per_worker", c.hub.lease_caps.per_worker);
  hub.get("max_leases_per_address", c.hub.lease_caps.per_address);
  hub.get("max_leases_per_token", c.hub.lease_caps.per_token);
  hub.get_seconds_as_ms("hoard_grace_s", c.hub.hoard_grace_ms);
  hub.get("hoard_min_tokens_per_s", c.hub.hoard_min_tokens_per_s);
  hub.get("swarm", c.hub.swarm);
  hub.get("swarm_web_seed_copies", c.hub.swarm_web_seed_copies);
  hub.get("swarm_reseed_after_s", c.hub.swarm_reseed_after_s);
  hub.get("swarm_web_seed_budget", c.hub.swarm_web_seed_budget);
  hub.check_unknown();
  STOA_CHECK(c.hub.swarm_web_seed_copies >= 1 && c.hub.swarm_web_seed_copies <= 255,
             ErrorKind::kInvalidArgument, source, ": [hub] swarm_web_seed_copies must be 1..255");
  STOA_CHECK(c.hub.swarm_reseed_after_s >= 1 && c.hub.swarm_reseed_after_s <= 3600,
             ErrorKind::kInvalidArgument, source, ": [hub] swarm_reseed_after_s must be 1..3600");
  STOA_CHECK(c.hub.swarm_web_seed_budget >= 1 && c.hub.swarm_web_seed_budget <= 255,
             ErrorKind::kInvalidArgument, source,
             ": [hub] swarm_web_seed_budget must be 1..255 (blob sizes)");
  STOA_CHECK(c.hub.hoard_min_tokens_per_s >= 0 && std::isfinite(c.hub.hoard_min_tokens_per_s),
             ErrorKind::kInvalidArgument, source,
             ": [hub] hoard_min_tokens_per_s must be a finite number >= 0 (0: no revocation)");
  c.hub.beyond_loopback = !hub::is_loopback_host(c.server.host);
  STOA_CHECK(!c.hub.join_token.empty(), ErrorKind::kInvalidArgument, source,
             ": [hub] join_token is required");
  STOA_CHECK(c.hub.group_size >= 1, ErrorKind::kInvalidArgument, source,
             ": [hub] group_size must be >= 1");
  STOA_CHECK(c.hub.heartbeat_interval_s >= 1, ErrorKind::kInvalidArgument, source,
             ": [hub] heartbeat_interval_s must be >= 1");
  STOA_CHECK(c.hub.session_ttl_ms >= 2000 && c.hub.worker_idle_expiry_ms >= 1000,
             ErrorKind::kInvalidArgument, source,
             ": [hub] session_ttl_s must be >= 2 and worker_expiry_s >= 1");
  STOA_CHECK(c.hub.lease_ttl_ms >= 1000, ErrorKind::kInvalidArgument, source,
             ": [hub] lease_ttl_s must be >= 1");
  STOA_CHECK(c.server.tls_cert_path.empty() == c.server.tls_key_path.empty(),
             ErrorKind::kInvalidArgument, source, ": [hub] tls_cert and tls_key go together");
  c.server.tls_cert_path = resolve(base_dir, c.server.tls_cert_path);
  c.server.tls_key_path = resolve(base_dir, c.server.tls_key_path);

  Section s(root["sampling"].as_table(), "sampling", source);
  s.get("temperature", c.hub.sampling.temperature);
  s.get("top_p", c.hub.sampling.top_p);
  s.get("top_k", c.hub.sampling.top_k);
  s.get("max_new_tokens", c.hub.sampling.max_new_tokens);
  s.get("max_turns", c.hub.sampling.max_turns);
  s.get("max_observation_tokens", c.hub.sampling.max_observation_tokens);
  s.check_unknown();

  Section t(root["trainer"].as_table(), "trainer", source);
  auto& to = c.train;
  t.get("device", to.device);
  std::string dtype = dtype_name(to.compute_dtype);
  t.get("dtype", dtype);
  STOA_CHECK(parse_dtype(dtype, &to.compute_dtype) &&
                 (to.compute_dtype == DType::kF32 || to.compute_dtype == DType::kBF16),
             ErrorKind::kInvalidArgument, source, ": [trainer] dtype: '", dtype,
             "' is not f32 or bf16");
  t.get("threads", to.threads);
  std::string sharding = train::sharding_name(to.sharding);
  t.get("sharding", sharding);
  to.sharding = train::parse_sharding(sharding);
  t.get("lr", to.optimizer.lr);
  t.get("weight_decay", to.optimizer.weight_decay);
  t.get("max_grad_norm", to.optimizer.max_grad_norm);
  t.get("warmup_steps", to.schedule.warmup_steps);
  t.get("micro_batch_tokens", to.micro_batch_tokens);
  t.get("seed", to.seed);
  std::string loss = train::loss_kind_name(to.loss.kind);
  std::string advantage = train::advantage_kind_name(to.loss.advantage);
  std::string aggregation = train::aggregation_name(to.loss.aggregation);
  t.get("loss", loss);
  t.get("advantage", advantage);
  t.get("aggregation", aggregation);
  t.get("delta_hi", to.loss.delta_hi);
  t.get("delta_lo", to.loss.delta_lo);
  t.get("clip_eps_hi", to.loss.clip_eps_hi);
  t.get("clip_eps_lo", to.loss.clip_eps_lo);
  t.get("ratio_cap", to.loss.ratio_cap);
  t.get("groups_per_step", c.loop.groups_per_step);
  t.get("min_groups", c.loop.min_groups);
  t.get("skip_uniform_groups", c.loop.skip_uniform_groups);
  int64_t gather_ms = c.loop.gather_timeout.count();
  t.get("gather_timeout_ms", gather_ms);
  c.loop.gather_timeout = std::chrono::milliseconds(gather_ms);
  t.get("max_staleness", c.loop.staleness.max_staleness);
  t.get("checkpoint_every", c.loop.checkpoint_every);
  t.check_unknown();
  to.temperature = c.hub.sampling.temperature;  // π is scored where μ was sampled
  try {
    to.loss.kind = train::parse_loss_kind(loss);
    to.loss.advantage = train::parse_advantage_kind(advantage);
    to.loss.aggregation = train::parse_aggregation(aggregation);
    train::validate_train_options(to);
  } catch (const Error& e) {
    fail(ErrorKind::kInvalidArgument, source, ": [trainer] ", e.what());
  }
  // The hub refuses at intake what the trainer would drop anyway: one bound for both.
  c.hub.max_staleness = c.loop.staleness.max_staleness;
  // Back-pressure: complete groups queued for the trainer age by one version per
  // groups_per_step; a queue deeper than the staleness window only fills up with groups the
  // trainer will drop as stale (measured: the default 64 with 2 groups/step dropped 57 of 70).
  // Unless set, hold about half the window's worth — twice that when uniform groups are skipped:
  // a step then takes more groups than groups_per_step (measured: with the single depth the
  // trainer waited for groups 28 % of the time while the workers had spare capacity).
  if (c.max_queued_groups) {
    c.hub.max_queued_groups = *c.max_queued_groups;
  } else {
    const size_t half_window = std::max<size_t>(1, (c.loop.staleness.max_staleness + 1) / 2);
    c.hub.max_queued_groups =
        c.loop.groups_per_step * half_window * (c.loop.skip_uniform_groups ? 2 : 1);
  }
  c.hub.topk = train::loss_needs_topk(to.loss.kind) && c.hub.topk == 0 ? 8 : c.hub.topk;

  Section p(root["pulse"].as_table(), "pulse", source);
  p.get("anchor_every", c.loop.publisher.anchor_every);
  p.get("keep_anchors", c.loop.publisher.retention.keep_anchors);
  p.check_unknown();
  STOA_CHECK(c.loop.publisher.anchor_every >= 1, ErrorKind::kInvalidArgument, source,
             ": [pulse] anchor_every must be >= 1");

  // Replay verification (docs/design/verification.md).
  Section v(root["verify"].as_table(), "verify", source);
  auto& vp = c.hub.verify;
  bool enabled = false;
  v.get("enabled", enabled);
  if (root["verify"]["enabled"]) c.verify_enabled = enabled;
  // Beyond loopback strangers may join: replay verification is on unless the file says no.
  vp.enabled = c.verify_enabled.value_or(c.hub.beyond_loopback);
  v.get("fraction", vp.fraction);
  v.get("first_rollouts", vp.first_rollouts);
  v.get_seconds_as_ms("max_wait_s", vp.max_wait_ms);
  v.get("train_on_timeout", vp.train_on_timeout);
  v.get("threads", vp.threads);
  v.get("max_queue", vp.max_queue);
  v.get("remote", vp.remote);
  v.get_seconds_as_ms("job_lease_s", vp.job_lease_ms);
  // Peer checks: on by default where verification is on by default (strangers may join).
  bool peer = false;
  v.get("peer", peer);
  if (root["verify"]["peer"]) c.verify_peer = peer;
  vp.peer = vp.enabled && c.verify_peer.value_or(c.hub.beyond_loopback);
  v.get_seconds_as_ms("peer_wait_s", vp.peer_wait_ms);
  v.get_seconds_as_ms("peer_lease_s", vp.peer_lease_ms);
  v.get("audit_fraction", vp.audit_fraction);
  v.get("check_share", vp.check_share);
  v.get("check_allowance", vp.check_allowance);
  v.get("max_checks_in_flight", vp.max_checks_in_flight);
  v.check_unknown();
  STOA_CHECK(vp.audit_fraction >= 0 && vp.audit_fraction <= 1 && vp.check_share >= 0 &&
                 vp.check_allowance >= 0 && vp.max_checks_in_flight >= 1 &&
                 vp.peer_wait_ms >= 1000 && vp.peer_lease_ms >= 1000,
             ErrorKind::kInvalidArgument, source,
             ": [verify] audit_fraction must be in [0, 1], check_share and check_allowance >= 0, "
             "max_checks_in_flight >= 1, peer_wait_s and peer_lease_s >= 1");
  STOA_CHECK(vp.fraction >= 0 && vp.fraction <= 1 && vp.threads >= (vp.remote ? 0 : 1) &&
                 vp.max_queue >= 1 && vp.job_lease_ms >= 1000,
             ErrorKind::kInvalidArgument, source,
             ": [verify] fraction must be in [0, 1], max_queue and job_lease_s >= 1, threads >= 1 "
             "(>= 0 with remote = true)");

  c.hub.ledger_path = c.run_dir + "/ledger.sqlite";
  c.loop.checkpoint_dir = c.run_dir + "/checkpoint";
  c.loop.log_path = c.run_dir + "/steps.jsonl";
  return c;
}

namespace {

// toml++ holds integers as int64_t: a value the reader would refuse (negative) or that does not
// fit is refused here too, naming the key.
template <typename T>
int64_t toml_integer(T value, const char* section, const char* key) {
  if constexpr (std::is_signed_v<T>) {
    STOA_CHECK(value >= 0, ErrorKind::kInvalidArgument, "run config: [", section, "] ", key,
               " must be >= 0 (got ", value, ")");
  } else {
    STOA_CHECK(value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
               ErrorKind::kInvalidArgument, "run config: [", section, "] ", key,
               " does not fit a TOML integer");
  }
  return static_cast<int64_t>(value);
}

int64_t whole_seconds(int64_t ms, const char* key) {
  STOA_CHECK(ms % 1000 == 0, ErrorKind::kInvalidArgument, "run config: [hub] ", key,
             " is in whole seconds (got ", ms, " ms)");
  return toml_integer(ms / 1000, "hub", key);
}

// `key = value` lines in the reader's order, each value in its shortest form that reads back
// bit for bit (0.7, not 0.69999999999999996), strings quoted and escaped by toml++.
class TomlWriter {
 public:
  void section(const char* name) { out_ << (out_.tellp() > 0 ? "\n[" : "[") << name << "]\n"; }
  void put(const char* key, const std::string& value) {
    out_ << key << " = " << toml::value<std::string>(value) << '\n';
  }
  void put(const char* key, bool value) {
    out_ << key << " = " << (value ? "true" : "false") << '\n';
  }
  void put(const char* key, int64_t value) { out_ << key << " = " << value << '\n'; }
  // A float (sampling) is written as the float's shortest form: the reader's double rounds
  // back to the same float.
  void put(const char* key, float value) { put_number(key, value); }
  void put(const char* key, double value) { put_number(key, value); }
  std::string text() const { return out_.str(); }

 private:
  template <typename T>
  void put_number(const char* key, T value) {
    out_ << key << " = ";
    if (std::isnan(value)) {
      out_ << "nan";
    } else if (std::isinf(value)) {
      out_ << (value < 0 ? "-inf" : "inf");
    } else {
      char buf[64];
      const auto end = std::to_chars(buf, buf + sizeof(buf), value).ptr;
      const std::string_view digits(buf, static_cast<size_t>(end - buf));
      out_ << digits;
      if (digits.find_first_of(".e") == std::string_view::npos) out_ << ".0";  // stays a float
    }
    out_ << '\n';
  }
  std::ostringstream out_;
};

}  // namespace

std::string to_toml(const RunConfig& c) {
  const auto& to = c.train;
  const auto& sp = c.hub.sampling;
  TomlWriter w;
  w.section("run");
  w.put("dir", c.run_dir);
  w.put("model", c.model_dir);
  w.put("data", c.data_dir);
  w.put("task", c.task);
  w.put("max_steps", toml_integer(c.loop.max_steps, "run", "max_steps"));
  // Options are strings to the task: written as TOML strings, they read back the same.
  if (!c.task_options.empty()) {
    w.section("task");
    for (const auto& [key, value] : c.task_options.values()) {
      STOA_CHECK(!key.empty() && key.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
                                     std::string::npos,
                 ErrorKind::kInvalidArgument, "run config: [task] option name '", key,
                 "' is not a bare TOML key");
      w.put(key.c_str(), value);
    }
  }
  w.section("hub");
  w.put("host", c.server.host);
  w.put("port", toml_integer(c.server.port, "hub", "port"));
  w.put("threads", toml_integer(c.server.threads, "hub", "threads"));
  w.put("header_timeout_s", toml_integer(c.server.header_timeout_s, "hub", "header_timeout_s"));
  w.put("body_timeout_s", toml_integer(c.server.body_timeout_s, "hub", "body_timeout_s"));
  w.put("idle_timeout_s", toml_integer(c.server.idle_timeout_s, "hub", "idle_timeout_s"));
  w.put("max_connections_per_ip",
        toml_integer(c.server.max_connections_per_ip, "hub", "max_connections_per_ip"));
  w.put("tls_cert", c.server.tls_cert_path);
  w.put("tls_key", c.server.tls_key_path);
  w.put("join_token", c.hub.join_token);
  w.put("group_size", toml_integer(c.hub.group_size, "hub", "group_size"));
  w.put("lease_ttl_s", whole_seconds(c.hub.lease_ttl_ms, "lease_ttl_s"));
  w.put("lease_max_s", whole_seconds(c.hub.lease_max_ms, "lease_max_s"));
  w.put("max_open_groups", toml_integer(c.hub.max_open_groups, "hub", "max_open_groups"));
  if (c.max_queued_groups)
    w.put("max_queued_groups", toml_integer(*c.max_queued_groups, "hub", "max_queued_groups"));
  w.put("max_tokens", toml_integer(c.hub.max_tokens, "hub", "max_tokens"));
  w.put("topk", toml_integer(c.hub.topk, "hub", "topk"));
  w.put("seed", toml_integer(c.hub.seed, "hub", "seed"));
  w.put("heartbeat_interval_s",
        toml_integer(c.hub.heartbeat_interval_s, "hub", "heartbeat_interval_s"));
  w.put("operator_token", c.hub.operator_token);
  w.put("trainer_token", c.hub.trainer_token);
  w.put("session_ttl_s", whole_seconds(c.hub.session_ttl_ms, "session_ttl_s"));
  w.put("worker_expiry_s", whole_seconds(c.hub.worker_idle_expiry_ms, "worker_expiry_s"));
  hub::HubLimits limits = c.hub.limits;
  for (auto& [name, limit] : rate_limits(limits)) {
    w.put((name + "_per_s").c_str(), limit->rate_per_s);
    w.put((name + "_burst").c_str(), limit->burst);
  }
  w.put("max_leases_per_worker",
        toml_integer(c.hub.lease_caps.per_worker, "hub", "max_leases_per_worker"));
  w.put("max_leases_per_address",
        toml_integer(c.hub.lease_caps.per_address, "hub", "max_leases_per_address"));
  w.put("max_leases_per_token",
        toml_integer(c.hub.lease_caps.per_token, "hub", "max_leases_per_token"));
  w.put("hoard_grace_s", whole_seconds(c.hub.hoard_grace_ms, "hoard_grace_s"));
  w.put("hoard_min_tokens_per_s", c.hub.hoard_min_tokens_per_s);
  w.put("swarm", c.hub.swarm);
  w.put("swarm_web_seed_copies",
        toml_integer(c.hub.swarm_web_seed_copies, "hub", "swarm_web_seed_copies"));
  w.put("swarm_web_seed_budget", c.hub.swarm_web_seed_budget);
  w.put("swarm_reseed_after_s",
        toml_integer(c.hub.swarm_reseed_after_s, "hub", "swarm_reseed_after_s"));
  w.section("sampling");
  w.put("temperature", sp.temperature);
  w.put("top_p", sp.top_p);
  w.put("top_k", toml_integer(sp.top_k, "sampling", "top_k"));
  w.put("max_new_tokens", toml_integer(sp.max_new_tokens, "sampling", "max_new_tokens"));
  w.put("max_turns", toml_integer(sp.max_turns, "sampling", "max_turns"));
  w.put("max_observation_tokens",
        toml_integer(sp.max_observation_tokens, "sampling", "max_observation_tokens"));
  w.section("trainer");
  w.put("device", to.device);
  w.put("dtype", std::string(dtype_name(to.compute_dtype)));
  w.put("sharding", std::string(train::sharding_name(to.sharding)));
  w.put("threads", toml_integer(to.threads, "trainer", "threads"));
  w.put("lr", to.optimizer.lr);
  w.put("weight_decay", to.optimizer.weight_decay);
  w.put("max_grad_norm", to.optimizer.max_grad_norm);
  w.put("warmup_steps", toml_integer(to.schedule.warmup_steps, "trainer", "warmup_steps"));
  w.put("micro_batch_tokens", toml_integer(to.micro_batch_tokens, "trainer", "micro_batch_tokens"));
  w.put("seed", toml_integer(to.seed, "trainer", "seed"));
  w.put("loss", std::string(train::loss_kind_name(to.loss.kind)));
  w.put("advantage", std::string(train::advantage_kind_name(to.loss.advantage)));
  w.put("aggregation", std::string(train::aggregation_name(to.loss.aggregation)));
  w.put("delta_hi", to.loss.delta_hi);
  w.put("delta_lo", to.loss.delta_lo);
  w.put("clip_eps_hi", to.loss.clip_eps_hi);
  w.put("clip_eps_lo", to.loss.clip_eps_lo);
  w.put("ratio_cap", to.loss.ratio_cap);
  w.put("groups_per_step", toml_integer(c.loop.groups_per_step, "trainer", "groups_per_step"));
  w.put("min_groups", toml_integer(c.loop.min_groups, "trainer", "min_groups"));
  w.put("skip_uniform_groups", c.loop.skip_uniform_groups);
  w.put("gather_timeout_ms", toml_integer(static_cast<int64_t>(c.loop.gather_timeout.count()),
                                          "trainer", "gather_timeout_ms"));
  w.put("max_staleness", toml_integer(c.loop.staleness.max_staleness, "trainer", "max_staleness"));
  w.put("checkpoint_every", toml_integer(c.loop.checkpoint_every, "trainer", "checkpoint_every"));
  w.section("pulse");
  w.put("anchor_every", toml_integer(c.loop.publisher.anchor_every, "pulse", "anchor_every"));
  w.put("keep_anchors",
        toml_integer(c.loop.publisher.retention.keep_anchors, "pulse", "keep_anchors"));
  const auto& vp = c.hub.verify;
  w.section("verify");
  // The host's default is left to the reader, so a config moved to a public host turns it on.
  if (c.verify_enabled || vp.enabled != !hub::is_loopback_host(c.server.host))
    w.put("enabled", vp.enabled);
  w.put("fraction", vp.fraction);
  w.put("first_rollouts", toml_integer(vp.first_rollouts, "verify", "first_rollouts"));
  w.put("max_wait_s", toml_integer(vp.max_wait_ms / 1000, "verify", "max_wait_s"));
  w.put("train_on_timeout", vp.train_on_timeout);
  w.put("threads", toml_integer(vp.threads, "verify", "threads"));
  w.put("max_queue", toml_integer(vp.max_queue, "verify", "max_queue"));
  w.put("remote", vp.remote);
  w.put("job_lease_s", toml_integer(vp.job_lease_ms / 1000, "verify", "job_lease_s"));
  if (c.verify_peer || vp.peer != !hub::is_loopback_host(c.server.host)) w.put("peer", vp.peer);
  w.put("peer_wait_s", toml_integer(vp.peer_wait_ms / 1000, "verify", "peer_wait_s"));
  w.put("peer_lease_s", toml_integer(vp.peer_lease_ms / 1000, "verify", "peer_lease_s"));
  w.put("audit_fraction", vp.audit_fraction);
  w.put("check_share", vp.check_share);
  w.put("check_allowance", toml_integer(vp.check_allowance, "verify", "check_allowance"));
  w.put("max_checks_in_flight", toml_integer(static_cast<int64_t>(vp.max_checks_in_flight),
                                             "verify", "max_checks_in_flight"));
  return w.text();
}

void save_run_config(const RunConfig& config, const std::string& path, const std::string& header) {
  const std::string text = to_toml(config);  // before opening: a refused value writes nothing
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) out << "# " << line << '\n';
  out << text;
  STOA_CHECK(out.good(), ErrorKind::kIo, "cannot write the run config ", path);
}

RunConfig load_run_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in.good(), ErrorKind::kNotFound, "run config ", path, " cannot be opened");
  std::ostringstream s;
  s << in.rdbuf();
  return parse_run_config(s.str(), path, fs::path(path).parent_path().string());
}

}  // namespace stoa::run
