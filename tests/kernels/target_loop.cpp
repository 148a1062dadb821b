#include "kernels/target_loop.h"

#include "kernels/targets.h"

namespace stoa::kernels::test {

void for_each_target(const std::function<void()>& body) {
  const auto targets = available_targets();
  ASSERT_GE(targets.size(), 2u) << "expected at least one SIMD target besides the fallback";
  for (int64_t target : targets) {
    force_target(target);
    ASSERT_EQ(active_target(), target) << target_name(target);
    SCOPED_TRACE("target " + target_name(target));
    body();
  }
  force_target(0);
}

}  // namespace stoa::kernels::test
