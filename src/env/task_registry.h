// Tasks by name. The run config names the task and its options (`[run] task`, `[task]`); the hub
// builds it to render prompts and recompute rewards, and names it in the join reply
// (net::JoinResponse::task) with the run's shared options, from which every worker and validator
// builds the same task. A task's options are of two kinds (TaskKeys): the run's (every machine
// must use the same value: they change what a rollout is, e.g. search's topk) and each machine's
// own (where its tools are: a local index, a server URL). A name the registry does not know is
// an error that lists the names it does know, so a worker older than the hub's task fails at
// join instead of producing rollouts for the wrong protocol.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "env/task.h"

namespace stoa::env {

// A task's options as key = value strings: what differs between machines running the same task
// (paths, URLs) and the task's own knobs. Each factory states the keys it accepts; any other key
// is an error, so a misspelt option never falls back to a default silently.
class TaskOptions {
 public:
  TaskOptions() = default;
  TaskOptions(std::initializer_list<std::pair<const std::string, std::string>> values)
      : values_(values) {}
  explicit TaskOptions(std::map<std::string, std::string> values) : values_(std::move(values)) {}

  void set(const std::string& key, std::string value) { values_[key] = std::move(value); }
  void erase(const std::string& key) { values_.erase(key); }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  bool empty() const { return values_.empty(); }
  const std::map<std::string, std::string>& values() const { return values_; }
  bool operator==(const TaskOptions& other) const { return values_ == other.values_; }
  // The value, or `fallback` when the key is absent.
  std::string get(const std::string& key, const std::string& fallback = "") const;
  // The value as a decimal integer, or `fallback` when absent; kInvalidArgument naming the task
  // and the key when it is not one.
  int get_int(std::string_view task, const std::string& key, int fallback) const;
  // kInvalidArgument naming the task, the first unknown key and the accepted ones.
  void expect_only(std::string_view task, const std::vector<std::string>& accepted) const;

 private:
  std::map<std::string, std::string> values_;
};

using TaskFactory = std::function<std::unique_ptr<Task>(const TaskOptions&)>;

// The option keys a task accepts, and which of them are each machine's own. With `accepted`
// empty the registry checks nothing and leaves every key to the factory (and every key is the
// run's). `paths` name the options that are file paths: a run config resolves them against its
// own directory.
struct TaskKeys {
  std::vector<std::string> accepted;
  std::vector<std::string> local;  // a subset of accepted
  std::vector<std::string> paths;  // a subset of accepted
};

class TaskRegistry {
 public:
  // kInvalidArgument for an empty name, a name already registered, an empty factory, or local /
  // path keys that are not accepted.
  void add(const std::string& name, TaskFactory factory, TaskKeys keys = {});
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  std::vector<std::string> names() const;  // sorted
  // kNotFound listing the known names when `name` is not registered.
  const TaskKeys& keys(const std::string& name) const;
  // kNotFound for an unknown name; kInvalidArgument naming the task, the first unknown key and
  // the accepted ones. Checks without building the task (a run config is checked at load, before
  // the index or the server it names exists).
  void check_options(const std::string& name, const TaskOptions& options) const;
  // The options every machine of the run must share: `options` without the local keys.
  TaskOptions run_options(const std::string& name, const TaskOptions& options) const;
  // A worker's or validator's options: the run's (from the hub) and the machine's own. A local
  // option naming one of the run's keys is kInvalidArgument: the run decides it, not one machine.
  TaskOptions with_local(const std::string& name, const TaskOptions& run,
                         const TaskOptions& local) const;
  // Builds the named task (check_options first). kNotFound listing the known names when `name`
  // is not registered; whatever the factory throws for bad options; kInternal when the task built
  // reports another name than it is registered under (the hub sends Task::name() to workers, who
  // look it up here).
  std::unique_ptr<Task> make(const std::string& name, const TaskOptions& options) const;

 private:
  struct Entry {
    TaskFactory factory;
    TaskKeys keys;
  };
  const Entry& entry(const std::string& name) const;
  std::map<std::string, Entry> entries_;
};

}  // namespace stoa::env
