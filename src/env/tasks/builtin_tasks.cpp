#include "env/tasks/builtin_tasks.h"

#include "env/tasks/http_env/http_env_task.h"
#include "env/tasks/search/search_task.h"

namespace stoa::env {

const TaskRegistry& builtin_tasks() {
  static const TaskRegistry registry = [] {
    TaskRegistry r;
    r.add("search", make_search_task, search_task_keys());
    r.add("http", make_http_env_task, http_env_task_keys());
    return r;
  }();
  return registry;
}

std::unique_ptr<Task> make_task(const std::string& name, const TaskOptions& options) {
  return builtin_tasks().make(name, options);
}

}  // namespace stoa::env
