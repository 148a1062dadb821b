#include "env/task_registry.h"

#include <charconv>

#include "core/error.h"

namespace stoa::env {
namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

bool contains_key(const std::vector<std::string>& keys, const std::string& key) {
  for (const auto& k : keys)
    if (k == key) return true;
  return false;
}

}  // namespace

std::string TaskOptions::get(const std::string& key, const std::string& fallback) const {
  auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

int TaskOptions::get_int(std::string_view task, const std::string& key, int fallback) const {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  const std::string& text = it->second;
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  STOA_CHECK(ec == std::errc() && end == text.data() + text.size() && !text.empty(),
             ErrorKind::kInvalidArgument, "task '", task, "': option ", key,
             " must be an integer, got '", text, "'");
  return value;
}

void TaskOptions::expect_only(std::string_view task,
                              const std::vector<std::string>& accepted) const {
  for (const auto& [key, value] : values_) {
    STOA_CHECK(contains_key(accepted, key), ErrorKind::kInvalidArgument, "task '", task,
               "': unknown option '", key, "' (accepted: ", joined(accepted), ")");
  }
}

void TaskRegistry::add(const std::string& name, TaskFactory factory, TaskKeys keys) {
  STOA_CHECK(!name.empty(), ErrorKind::kInvalidArgument, "task registry: empty task name");
  STOA_CHECK(factory != nullptr, ErrorKind::kInvalidArgument, "task registry: task '", name,
             "' has no factory");
  STOA_CHECK(!contains(name), ErrorKind::kInvalidArgument, "task registry: task '", name,
             "' is registered twice");
  for (const auto* subset : {&keys.local, &keys.paths}) {
    for (const auto& key : *subset) {
      STOA_CHECK(contains_key(keys.accepted, key), ErrorKind::kInvalidArgument,
                 "task registry: task '", name, "' names option '", key,
                 "' as local or a path but does not accept it");
    }
  }
  entries_.emplace(name, Entry{std::move(factory), std::move(keys)});
}

std::vector<std::string> TaskRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : entries_) out.push_back(name);
  return out;
}

const TaskRegistry::Entry& TaskRegistry::entry(const std::string& name) const {
  auto it = entries_.find(name);
  STOA_CHECK(it != entries_.end(), ErrorKind::kNotFound, "unknown task '", name,
             "' (known tasks: ", joined(names()), ")");
  return it->second;
}

const TaskKeys& TaskRegistry::keys(const std::string& name) const {
  return entry(name).keys;
}

void TaskRegistry::check_options(const std::string& name, const TaskOptions& options) const {
  const TaskKeys& k = keys(name);
  if (!k.accepted.empty()) options.expect_only(name, k.accepted);
}

TaskOptions TaskRegistry::run_options(const std::string& name, const TaskOptions& options) const {
  const TaskKeys& k = keys(name);
  TaskOptions out = options;
  for (const auto& key : k.local) out.erase(key);
  return out;
}

TaskOptions TaskRegistry::with_local(const std::string& name, const TaskOptions& run,
                                     const TaskOptions& local) const {
  const TaskKeys& k = keys(name);
  TaskOptions out = run;
  for (const auto& [key, value] : local.values()) {
    STOA_CHECK(contains_key(k.local, key), ErrorKind::kInvalidArgument, "task '", name,
               "': option '", key,
               "' is the run's (its [task] table sets it for every machine); this machine may set "
               "only: ",
               joined(k.local));
    out.set(key, value);
  }
  return out;
}

std::unique_ptr<Task> TaskRegistry::make(const std::string& name,
                                         const TaskOptions& options) const {
  const Entry& e = entry(name);
  check_options(name, options);
  std::unique_ptr<Task> task = e.factory(options);
  STOA_CHECK(task != nullptr, ErrorKind::kInternal, "task '", name, "': the factory built nothing");
  STOA_CHECK(task->name() == name, ErrorKind::kInternal, "task registered as '", name,
             "' calls itself '", task->name(), "'");
  return task;
}

}  // namespace stoa::env
