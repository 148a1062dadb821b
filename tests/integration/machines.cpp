// Network namespaces on a bridge (machines.h).
#include "integration/machines.h"

#include <unistd.h>

#include "core/process_run.h"

namespace stoa::integration {

namespace {

// Runs `cmd`; "" on success, else what failed.
std::string run_quietly(const std::vector<std::string>& cmd) {
  ProcessOptions o;
  o.out = OutputTarget::capture();
  o.err = OutputTarget::capture();
  const RunResult r = run_process(cmd, o);
  if (r.status.code == 0) return "";
  std::string what = "`" + cmd[0];
  for (size_t i = 1; i < cmd.size(); ++i) what += " " + cmd[i];
  return what + "` failed: " + r.err + " (this test needs root and iproute2)";
}

}  // namespace

Machines::Machines(const std::vector<std::string>& names) {
  const std::string id = std::to_string(::getpid() % 100000);
  const std::string subnet = "10.233." + std::to_string(::getpid() % 200 + 20) + ".";
  for (size_t i = 0; i < names.size(); ++i) {
    namespaces_.push_back("stoa-" + id + "-" + names[i]);
    addresses_.push_back(subnet + std::to_string(i + 1));
  }
  remove();
  const std::string& center = namespaces_[0];
  const std::string bridge = "br" + id;
  std::vector<std::vector<std::string>> cmds;
  for (const auto& n : namespaces_) cmds.push_back({"ip", "netns", "add", n});
  cmds.push_back({"ip", "-n", center, "link", "add", bridge, "type", "bridge"});
  cmds.push_back({"ip", "-n", center, "addr", "add", addresses_[0] + "/24", "dev", bridge});
  cmds.push_back({"ip", "-n", center, "link", "set", bridge, "up"});
  cmds.push_back({"ip", "-n", center, "link", "set", "lo", "up"});
  for (size_t i = 1; i < namespaces_.size(); ++i) {
    const std::string near = "m" + id + "a" + std::to_string(i);
    const std::string far = "m" + id + "b" + std::to_string(i);
    const std::string& n = namespaces_[i];
    for (auto cmd : std::vector<std::vector<std::string>>{
             {"ip", "link", "add", near, "type", "veth", "peer", "name", far},
             {"ip", "link", "set", near, "netns", center},
             {"ip", "link", "set", far, "netns", n},
             {"ip", "-n", center, "link", "set", near, "master", bridge},
             {"ip", "-n", center, "link", "set", near, "up"},
             {"ip", "-n", n, "addr", "add", addresses_[i] + "/24", "dev", far},
             {"ip", "-n", n, "link", "set", far, "up"},
             {"ip", "-n", n, "link", "set", "lo", "up"}})
      cmds.push_back(cmd);
  }
  for (const auto& cmd : cmds) {
    error = run_quietly(cmd);
    if (!error.empty()) return;
  }
}

Machines::~Machines() {
  remove();
}

// Deleting a namespace deletes its ends of the veth pairs, and with them the pairs.
void Machines::remove() {
  for (const auto& n : namespaces_) {
    ProcessOptions quiet;
    quiet.out = OutputTarget::discard();
    quiet.err = OutputTarget::discard();
    run_process({"ip", "netns", "delete", n}, quiet);
  }
}

}  // namespace stoa::integration
