#include "env/tasks/builtin_tasks.h"

#include "env/tasks/search/search_task.h"

namespace stoa::env {

const TaskRegistry& builtin_tasks() {
  static const TaskRegistry registry = [] {
    TaskRegistry r;
    r.add("search", make_search_task);
    return r;
  }();
  return registry;
}

std::unique_ptr<Task> make_task(const std::string& name, const TaskOptions& options) {
  return builtin_tasks().make(name, options);
}

}  // namespace stoa::env
