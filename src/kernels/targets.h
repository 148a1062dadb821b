// Which SIMD targets the kernels were compiled for, and a switch to force one (tests run every
// kernel on every target this CPU supports; the bench compares them). Normal callers never touch
// this: each kernel dispatches to the best target at run time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace stoa::kernels {

// Highway target bits compiled into the kernels AND supported by this CPU, best first (while a
// force_target() is in effect, only the forced one).
std::vector<int64_t> available_targets();
std::string target_name(int64_t target);
// The target the kernels dispatch to now.
int64_t active_target();
// Restricts dispatch to `target` (one of available_targets()); 0 restores the best. Not
// thread-safe: call it only while no kernel runs.
void force_target(int64_t target);

// The available target called `name` (as target_name() prints it, in any case); 0 when this
// build and CPU have none by that name (`stoa work --kernel-target`).
int64_t find_target(const std::string& name);
// target_name() of every available target, best first, joined by ", " (for error messages).
std::string available_target_names();

}  // namespace stoa::kernels
