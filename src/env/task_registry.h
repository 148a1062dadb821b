// Tasks by name. The hub names its task in the join reply (net::JoinResponse::task) and every
// worker builds that task from the registry with its own options (where its tools are: a local
// index, a server URL); the hub builds the same one to render prompts and recompute rewards. A
// name the registry does not know is an error that lists the names it does know, so a worker
// older than the hub's task fails at join instead of producing rollouts for the wrong protocol.
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

  void set(const std::string& key, std::string value) { values_[key] = std::move(value); }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
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

class TaskRegistry {
 public:
  // kInvalidArgument for an empty name, a name already registered or an empty factory.
  void add(const std::string& name, TaskFactory factory);
  bool contains(const std::string& name) const { return factories_.count(name) != 0; }
  std::vector<std::string> names() const;  // sorted
  // Builds the named task. kNotFound listing the known names when `name` is not registered;
  // whatever the factory throws for bad options; kInternal when the task built reports another
  // name than it is registered under (the hub sends Task::name() to workers, who look it up here).
  std::unique_ptr<Task> make(const std::string& name, const TaskOptions& options) const;

 private:
  std::map<std::string, TaskFactory> factories_;
};

}  // namespace stoa::env
