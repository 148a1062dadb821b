#include "app/demo/worker_targets.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "core/error.h"
#include "kernels/targets.h"

namespace stoa::app {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

std::vector<std::string> available_kernel_targets() {
  std::vector<std::string> names;
  for (int64_t target : kernels::available_targets()) names.push_back(kernels::target_name(target));
  return names;
}

std::vector<std::string> parse_kernel_targets(const std::string& list,
                                              const std::vector<std::string>& available) {
  if (trimmed(list).empty()) return {};
  if (upper(trimmed(list)) == "ALL") return available;
  std::string names;
  for (const auto& a : available) names += (names.empty() ? "" : ", ") + a;
  std::vector<std::string> out;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    item = trimmed(item);
    STOA_CHECK(!item.empty(), ErrorKind::kInvalidArgument, "--worker-kernel-targets \"", list,
               "\": an empty name in the list");
    bool found = false;
    for (const auto& a : available) {
      if (upper(a) != upper(item)) continue;
      out.push_back(a);
      found = true;
      break;
    }
    STOA_CHECK(found, ErrorKind::kInvalidArgument, "--worker-kernel-targets: this machine has no ",
               "kernel target \"", item, "\"; it has: ", names, " (or: all)");
  }
  return out;
}

std::vector<std::string> assign_kernel_targets(const std::vector<std::string>& targets,
                                               int workers) {
  std::vector<std::string> out;
  if (targets.empty()) return out;
  for (int i = 0; i < workers; ++i) out.push_back(targets[static_cast<size_t>(i) % targets.size()]);
  return out;
}

std::vector<std::string> assign_worker_backends(const std::string& list, int workers) {
  std::vector<std::string> backends;
  size_t at = 0;
  while (!list.empty() && at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    STOA_CHECK(item == "auto" || item == "cpu" || item == "vulkan", ErrorKind::kInvalidArgument,
               "--worker-backend \"", list, "\": '", item, "' is not auto, cpu or vulkan");
    backends.push_back(item);
    at = comma + 1;
  }
  return assign_kernel_targets(backends, workers);
}

}  // namespace stoa::app
