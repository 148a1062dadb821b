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

}  // namespace stoa::kernels
