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
    bool known = false;
    for (const auto& a : accepted) known = known || a == key;
    STOA_CHECK(known, ErrorKind::kInvalidArgument, "task '", task, "': unknown option '", key,
               "' (accepted: ", joined(accepted), ")");
  }
}

void TaskRegistry::add(const std::string& name, TaskFactory factory) {
  STOA_CHECK(!name.empty(), ErrorKind::kInvalidArgument, "task registry: empty task name");
  STOA_CHECK(factory != nullptr, ErrorKind::kInvalidArgument, "task registry: task '", name,
             "' has no factory");
  STOA_CHECK(!contains(name), ErrorKind::kInvalidArgument, "task registry: task '", name,
             "' is registered twice");
  factories_.emplace(name, std::move(factory));
}

std::vector<std::string> TaskRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, factory] : factories_) out.push_back(name);
  return out;
}

std::unique_ptr<Task> TaskRegistry::make(const std::string& name,
                                         const TaskOptions& options) const {
  auto it = factories_.find(name);
  STOA_CHECK(it != factories_.end(), ErrorKind::kNotFound, "unknown task '", name,
             "' (known tasks: ", joined(names()), ")");
  std::unique_ptr<Task> task = it->second(options);
  STOA_CHECK(task != nullptr, ErrorKind::kInternal, "task '", name, "': the factory built nothing");
  STOA_CHECK(task->name() == name, ErrorKind::kInternal, "task registered as '", name,
             "' calls itself '", task->name(), "'");
  return task;
}

}  // namespace stoa::env
