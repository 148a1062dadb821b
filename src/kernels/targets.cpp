#include "kernels/targets.h"

#include <hwy/targets.h>

#include <cctype>

namespace stoa::kernels {

int64_t matmul_dispatch_target();  // matmul_int8.cpp: HWY_TARGET of the dispatched code

std::vector<int64_t> available_targets() {
  return hwy::SupportedAndGeneratedTargets();
}

std::string target_name(int64_t target) {
  return hwy::TargetName(target);
}

int64_t active_target() {
  return matmul_dispatch_target();
}

void force_target(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
}

int64_t find_target(const std::string& name) {
  const auto same = [](const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::toupper(static_cast<unsigned char>(a[i])) !=
          std::toupper(static_cast<unsigned char>(b[i])))
        return false;
    return true;
  };
  for (int64_t target : available_targets())
    if (same(target_name(target), name)) return target;
  return 0;
}

std::string available_target_names() {
  std::string names;
  for (int64_t target : available_targets())
    names += (names.empty() ? "" : ", ") + target_name(target);
  return names;
}

}  // namespace stoa::kernels
