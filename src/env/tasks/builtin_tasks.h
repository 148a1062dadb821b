// Every task this build knows, by name: the registry the worker and the hub build their task
// from. Adding a task is one line in builtin_tasks.cpp (docs/tasks.md, "Adding a task").
#pragma once
#include <memory>
#include <string>

#include "env/task_registry.h"

namespace stoa::env {

const TaskRegistry& builtin_tasks();

// builtin_tasks().make(name, options).
std::unique_ptr<Task> make_task(const std::string& name, const TaskOptions& options);

}  // namespace stoa::env
