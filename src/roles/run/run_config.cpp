#include "roles/run/run_config.h"

#include <algorithm>
#include <charconv>
#include <chrono>
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
#include "roles/run/run_config_lora.h"

namespace stoa::run {
namespace fs = std::filesystem;
namespace {

// Reads typed values out of one [section], remembering which keys were consumed so that the
// leftovers can be reported as unknown. One of the two walkers of the key lists below.
class SectionReader {
 public:
  SectionReader(const toml::table* table, std::string name, std::string source)
      : table_(table), name_(std::move(name)), source_(std::move(source)) {}

  template <typename T>
  void value(const char* key, T& out) {
    if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
      int64_t ms = out.count();
      value(key, ms);
      out = std::chrono::milliseconds(ms);
      return;
    }
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
    } else if constexpr (std::is_integral_v<T>) {
      auto v = node->value_exact<int64_t>();
      if (!v) bad(key, "an integer");
      if (*v < 0) bad(key, "a non-negative integer");
      out = static_cast<T>(*v);
    }
  }
  // A duration the file gives in whole seconds (`key` ends in _s) and the config holds in ms.
  void seconds(const char* key, int64_t& ms) {
    int64_t whole = ms / 1000;
    value(key, whole);
    ms = whole * 1000;
  }
  // A value the file names (an enum, a dtype): `parse` refuses a name it does not know.
  template <typename E, typename Name, typename Parse>
  void named(const char* key, E& field, Name name, Parse parse) {
    std::string text(name(field));
    value(key, text);
    try {
      field = parse(text);
    } catch (const Error& e) {
      fail(ErrorKind::kInvalidArgument, source_, ": [", name_, "] ", e.what());
    }
  }
  void sub_table(const char* key) { used_.insert(key); }  // read on its own ([trainer.lora])
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

// The keys whose value is a field as it stands, each named once: the reader and the writer walk
// the same lists (`Keys` is SectionReader or TomlWriter, `Config` RunConfig or const RunConfig),
// so a key added here is read, written and round-trips. Keys whose absence means something
// ([hub] max_queued_groups, [verify] enabled and peer) are handled beside the lists.
template <typename Keys, typename Config>
void run_keys(Keys& k, Config& c) {
  k.value("dir", c.run_dir);
  k.value("model", c.model_dir);
  k.value("data", c.data_dir);
  k.value("task", c.task);
  k.value("max_steps", c.loop.max_steps);
}

// [hub] <limit>_per_s / <limit>_burst: the hub's token buckets (hub::HubLimits).
template <typename Limits>
auto rate_limits(Limits& l) {
  using Limit = std::conditional_t<std::is_const_v<Limits>, const hub::RateLimit, hub::RateLimit>;
  return std::vector<std::pair<std::string, Limit*>>{
      {"join_per_ip", &l.join_per_ip},         {"lease_per_worker", &l.lease_per_worker},
      {"lease_per_ip", &l.lease_per_ip},       {"rollouts_per_worker", &l.rollouts_per_worker},
      {"rollouts_per_ip", &l.rollouts_per_ip}, {"task_per_worker", &l.task_per_worker}};
}

template <typename Keys, typename Config>
void hub_keys(Keys& k, Config& c) {
  k.value("host", c.server.host);
  k.value("port", c.server.port);
  k.value("threads", c.server.threads);
  k.value("header_timeout_s", c.server.header_timeout_s);
  k.value("body_timeout_s", c.server.body_timeout_s);
  k.value("idle_timeout_s", c.server.idle_timeout_s);
  k.value("max_connections_per_ip", c.server.max_connections_per_ip);
  k.value("tls_cert", c.server.tls_cert_path);
  k.value("tls_key", c.server.tls_key_path);
  k.value("stage_relay_port", c.server.stage_relay_port);
  k.value("join_token", c.hub.join_token);
  k.value("group_size", c.hub.group_size);
  k.seconds("lease_ttl_s", c.hub.lease_ttl_ms);
  k.seconds("lease_max_s", c.hub.lease_max_ms);
  k.value("max_open_groups", c.hub.max_open_groups);
  k.value("max_tokens", c.hub.max_tokens);
  k.value("topk", c.hub.topk);
  k.value("seed", c.hub.seed);
  k.value("heartbeat_interval_s", c.hub.heartbeat_interval_s);
  k.value("operator_token", c.hub.operator_token);
  k.value("trainer_token", c.hub.trainer_token);
  k.seconds("session_ttl_s", c.hub.session_ttl_ms);
  k.seconds("worker_expiry_s", c.hub.worker_idle_expiry_ms);
  for (auto& [name, limit] : rate_limits(c.hub.limits)) {
    k.value((name + "_per_s").c_str(), limit->rate_per_s);
    k.value((name + "_burst").c_str(), limit->burst);
  }
  k.value("max_leases_per_worker", c.hub.lease_caps.per_worker);
  k.value("max_leases_per_address", c.hub.lease_caps.per_address);
  k.value("max_leases_per_token", c.hub.lease_caps.per_token);
  k.seconds("hoard_grace_s", c.hub.hoard_grace_ms);
  k.value("hoard_min_tokens_per_s", c.hub.hoard_min_tokens_per_s);
  k.value("swarm", c.hub.swarm);
  k.value("swarm_web_seed_copies", c.hub.swarm_web_seed_copies);
  k.value("swarm_reseed_after_s", c.hub.swarm_reseed_after_s);
  k.value("swarm_web_seed_budget", c.hub.swarm_web_seed_budget);
  k.value("fetches_per_blob", c.hub.fetches_per_blob);
  k.value("fetch_refill_s", c.hub.fetch_refill_s);
}

template <typename Keys, typename Config>
void sampling_keys(Keys& k, Config& c) {
  auto& sp = c.hub.sampling;
  k.value("temperature", sp.temperature);
  k.value("top_p", sp.top_p);
  k.value("top_k", sp.top_k);
  k.value("max_new_tokens", sp.max_new_tokens);
  k.value("max_turns", sp.max_turns);
  k.value("max_observation_tokens", sp.max_observation_tokens);
}

DType parse_trainer_dtype(const std::string& name) {
  DType dtype{};
  STOA_CHECK(parse_dtype(name, &dtype) && (dtype == DType::kF32 || dtype == DType::kBF16),
             ErrorKind::kInvalidArgument, "dtype: '", name, "' is not f32 or bf16");
  return dtype;
}

template <typename Keys, typename Config>
void trainer_keys(Keys& k, Config& c) {
  auto& to = c.train;
  k.value("device", to.device);
  k.named("dtype", to.compute_dtype, dtype_name, parse_trainer_dtype);
  k.value("threads", to.threads);
  k.named("sharding", to.sharding, train::sharding_name, train::parse_sharding);
  k.value("lr", to.optimizer.lr);
  k.value("weight_decay", to.optimizer.weight_decay);
  k.value("max_grad_norm", to.optimizer.max_grad_norm);
  k.value("warmup_steps", to.schedule.warmup_steps);
  k.value("micro_batch_tokens", to.micro_batch_tokens);
  k.value("seed", to.seed);
  k.named("loss", to.loss.kind, train::loss_kind_name, train::parse_loss_kind);
  k.named("advantage", to.loss.advantage, train::advantage_kind_name, train::parse_advantage_kind);
  k.named("aggregation", to.loss.aggregation, train::aggregation_name, train::parse_aggregation);
  k.value("delta_hi", to.loss.delta_hi);
  k.value("delta_lo", to.loss.delta_lo);
  k.value("clip_eps_hi", to.loss.clip_eps_hi);
  k.value("clip_eps_lo", to.loss.clip_eps_lo);
  k.value("ratio_cap", to.loss.ratio_cap);
  k.value("groups_per_step", c.loop.groups_per_step);
  k.value("min_groups", c.loop.min_groups);
  k.value("skip_uniform_groups", c.loop.skip_uniform_groups);
  k.value("no_signal_warn_steps", c.loop.no_signal_warn_steps);
  k.value("gather_timeout_ms", c.loop.gather_timeout);
  k.value("max_staleness", c.loop.staleness.max_staleness);
  k.value("checkpoint_every", c.loop.checkpoint_every);
}

template <typename Keys, typename Config>
void pulse_keys(Keys& k, Config& c) {
  k.value("anchor_every", c.loop.publisher.anchor_every);
  k.value("keep_anchors", c.loop.publisher.retention.keep_anchors);
}

template <typename Keys, typename Config>
void verify_keys(Keys& k, Config& c) {
  auto& vp = c.hub.verify;
  k.value("fraction", vp.fraction);
  k.value("first_rollouts", vp.first_rollouts);
  k.seconds("max_wait_s", vp.max_wait_ms);
  k.value("train_on_timeout", vp.train_on_timeout);
  k.value("threads", vp.threads);
  k.value("backend", vp.backend);
  k.value("max_queue", vp.max_queue);
  k.value("remote", vp.remote);
  k.seconds("job_lease_s", vp.job_lease_ms);
  k.seconds("peer_wait_s", vp.peer_wait_ms);
  k.seconds("peer_lease_s", vp.peer_lease_ms);
  k.value("audit_fraction", vp.audit_fraction);
  k.value("check_share", vp.check_share);
  k.value("check_allowance", vp.check_allowance);
  k.value("max_checks_in_flight", vp.max_checks_in_flight);
  k.value("canary_fraction", vp.canary_fraction);
}

template <typename Keys, typename Config>
void eval_keys(Keys& k, Config& c) {
  k.value("every_steps", c.eval.every_steps);
  k.value("questions", c.eval.questions);
  k.value("limit", c.eval.limit);
  k.value("pass_at", c.eval.pass_at);
  k.value("samples", c.eval.samples);
  k.value("temperature", c.eval.temperature);
  k.value("success_reward", c.eval.success_reward);
  k.value("batch", c.eval.batch);
  k.value("seed", c.eval.seed);
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
  static const std::set<std::string> kSections = {"run",     "task",  "hub",    "sampling",
                                                  "trainer", "pulse", "verify", "eval"};
  for (const auto& [k, v] : root) {
    const std::string key(k.str());
    STOA_CHECK(
        kSections.count(key) && v.is_table(), ErrorKind::kInvalidArgument, source,
        ": unknown section or key '", key,
        "' (expected [run], [task], [hub], [sampling], [trainer], [pulse], [verify], [eval]; "
        "docs/run-config.md)");
  }
  RunConfig c;
  c.run_dir = "run";
  c.loop.gather_timeout = std::chrono::milliseconds(2000);

  SectionReader run(root["run"].as_table(), "run", source);
  run_keys(run, c);
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

  SectionReader hub(root["hub"].as_table(), "hub", source);
  hub_keys(hub, c);
  size_t queued_groups = 0;
  hub.value("max_queued_groups", queued_groups);
  if (root["hub"]["max_queued_groups"]) c.max_queued_groups = queued_groups;
  hub.check_unknown();
  STOA_CHECK(c.hub.swarm_web_seed_copies >= 1 && c.hub.swarm_web_seed_copies <= 255,
             ErrorKind::kInvalidArgument, source, ": [hub] swarm_web_seed_copies must be 1..255");
  STOA_CHECK(c.hub.swarm_reseed_after_s >= 1 && c.hub.swarm_reseed_after_s <= 3600,
             ErrorKind::kInvalidArgument, source, ": [hub] swarm_reseed_after_s must be 1..3600");
  STOA_CHECK(c.hub.swarm_web_seed_budget >= 1 && c.hub.swarm_web_seed_budget <= 255,
             ErrorKind::kInvalidArgument, source,
             ": [hub] swarm_web_seed_budget must be 1..255 (blob sizes)");
  // Under one blob size a whole-blob request would never fit the bucket.
  STOA_CHECK((c.hub.fetches_per_blob == 0 || c.hub.fetches_per_blob >= 1) &&
                 std::isfinite(c.hub.fetches_per_blob) && c.hub.fetch_refill_s >= 1,
             ErrorKind::kInvalidArgument, source,
             ": [hub] fetches_per_blob must be 0 (no bound) or a finite number >= 1, and "
             "fetch_refill_s >= 1");
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

  SectionReader s(root["sampling"].as_table(), "sampling", source);
  sampling_keys(s, c);
  s.check_unknown();

  SectionReader t(root["trainer"].as_table(), "trainer", source);
  trainer_keys(t, c);
  t.sub_table("lora");
  t.check_unknown();
  read_lora_section(root["trainer"]["lora"].node(), source, &c.train, base_dir);
  auto& to = c.train;
  to.temperature = c.hub.sampling.temperature;  // π is scored where μ was sampled
  try {
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
  c.loop.topk = c.hub.topk;  // the hub refuses another K at intake; the trainer drops it

  SectionReader p(root["pulse"].as_table(), "pulse", source);
  pulse_keys(p, c);
  p.check_unknown();
  STOA_CHECK(c.loop.publisher.anchor_every >= 1, ErrorKind::kInvalidArgument, source,
             ": [pulse] anchor_every must be >= 1");

  // Replay verification (docs/design/verification.md).
  SectionReader v(root["verify"].as_table(), "verify", source);
  auto& vp = c.hub.verify;
  verify_keys(v, c);
  bool enabled = false;
  v.value("enabled", enabled);
  if (root["verify"]["enabled"]) c.verify_enabled = enabled;
  // Beyond loopback strangers may join: replay verification is on unless the file says no.
  vp.enabled = c.verify_enabled.value_or(c.hub.beyond_loopback);
  // Peer checks: on by default where verification is on by default (strangers may join).
  bool peer = false;
  v.value("peer", peer);
  if (root["verify"]["peer"]) c.verify_peer = peer;
  vp.peer = vp.enabled && c.verify_peer.value_or(c.hub.beyond_loopback);
  v.check_unknown();
  STOA_CHECK(
      vp.audit_fraction >= 0 && vp.audit_fraction <= 1 && vp.canary_fraction >= 0 &&
          vp.canary_fraction <= 0.5 && vp.check_share >= 0 && vp.check_allowance >= 0 &&
          vp.max_checks_in_flight >= 1 && vp.peer_wait_ms >= 1000 && vp.peer_lease_ms >= 1000,
      ErrorKind::kInvalidArgument, source,
      ": [verify] audit_fraction must be in [0, 1], canary_fraction in [0, 0.5], check_share "
      "and check_allowance >= 0, "
      "max_checks_in_flight >= 1, peer_wait_s and peer_lease_s >= 1");
  STOA_CHECK(vp.fraction >= 0 && vp.fraction <= 1 && vp.threads >= (vp.remote ? 0 : 1) &&
                 vp.max_queue >= 1 && vp.job_lease_ms >= 1000,
             ErrorKind::kInvalidArgument, source,
             ": [verify] fraction must be in [0, 1], max_queue and job_lease_s >= 1, threads >= 1 "
             "(>= 0 with remote = true)");

  STOA_CHECK(vp.backend == "cpu" || vp.backend == "vulkan" || vp.backend == "auto",
             ErrorKind::kInvalidArgument, source,
             ": [verify] backend must be cpu, vulkan or auto, not '", vp.backend, "'");

  SectionReader e(root["eval"].as_table(), "eval", source);
  eval_keys(e, c);
  e.check_unknown();
  c.eval.questions = resolve(base_dir, c.eval.questions);
  const int eval_samples = c.eval.samples > 0 ? c.eval.samples : c.eval.pass_at;
  STOA_CHECK(c.eval.pass_at >= 1 && c.eval.pass_at <= eval_samples && c.eval.batch >= 1 &&
                 (eval_samples == 1 || c.eval.temperature > 0),
             ErrorKind::kInvalidArgument, source,
             ": [eval] needs pass_at >= 1, samples 0 or >= pass_at, batch >= 1, and temperature "
             "> 0 for more than one sample per question (greedy samples are all the same)");

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

// `key = value` lines in the key lists' order, each value in its shortest form that reads back
// bit for bit (0.7, not 0.69999999999999996), strings quoted and escaped by toml++. The other
// walker of the key lists.
class TomlWriter {
 public:
  void section(const char* name) {
    section_ = name;
    out_ << (out_.tellp() > 0 ? "\n[" : "[") << name << "]\n";
  }
  template <typename T>
  void value(const char* key, const T& v) {
    std::ostringstream text;
    if constexpr (std::is_same_v<T, std::string>) {
      text << toml::value<std::string>(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      text << (v ? "true" : "false");
    } else if constexpr (std::is_floating_point_v<T>) {
      // A float (sampling) is written as the float's shortest form: the reader's double rounds
      // back to the same float.
      text << number(v);
    } else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
      text << toml_integer(static_cast<int64_t>(v.count()), section_, key);
    } else {
      text << toml_integer(v, section_, key);
    }
    out_ << key << " = " << text.str() << '\n';
  }
  void seconds(const char* key, const int64_t& ms) {
    STOA_CHECK(ms % 1000 == 0, ErrorKind::kInvalidArgument, "run config: [", section_, "] ", key,
               " is in whole seconds (got ", ms, " ms)");
    value(key, ms / 1000);
  }
  template <typename E, typename Name, typename Parse>
  void named(const char* key, const E& field, Name name, Parse /*parse*/) {
    value(key, std::string(name(field)));
  }
  void text_block(const std::string& text) { out_ << text; }  // a section written elsewhere
  std::string text() const { return out_.str(); }

 private:
  template <typename T>
  static std::string number(T value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
    char buf[64];
    std::string digits(buf, std::to_chars(buf, buf + sizeof(buf), value).ptr);
    if (digits.find_first_of(".e") == std::string::npos) digits += ".0";  // stays a float
    return digits;
  }
  const char* section_ = "";
  std::ostringstream out_;
};

}  // namespace

std::string to_toml(const RunConfig& c) {
  TomlWriter w;
  w.section("run");
  run_keys(w, c);
  // Options are strings to the task: written as TOML strings, they read back the same.
  if (!c.task_options.empty()) {
    w.section("task");
    for (const auto& [key, value] : c.task_options.values()) {
      STOA_CHECK(!key.empty() && key.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
                                     std::string::npos,
                 ErrorKind::kInvalidArgument, "run config: [task] option name '", key,
                 "' is not a bare TOML key");
      w.value(key.c_str(), value);
    }
  }
  w.section("hub");
  hub_keys(w, c);
  if (c.max_queued_groups) w.value("max_queued_groups", *c.max_queued_groups);
  w.section("sampling");
  sampling_keys(w, c);
  w.section("trainer");
  trainer_keys(w, c);
  w.text_block(lora_section_toml(c.train.lora));
  w.section("pulse");
  pulse_keys(w, c);
  w.section("verify");
  verify_keys(w, c);
  // The host's default is left to the reader, so a config moved to a public host turns it on.
  const auto& vp = c.hub.verify;
  if (c.verify_enabled || vp.enabled != !hub::is_loopback_host(c.server.host))
    w.value("enabled", vp.enabled);
  if (c.verify_peer || vp.peer != !hub::is_loopback_host(c.server.host)) w.value("peer", vp.peer);
  w.section("eval");
  eval_keys(w, c);
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
