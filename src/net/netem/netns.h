// Network namespaces as the link emulator uses them: a TUN device opened inside one (the fd
// stays in the router's hands, the device in the namespace), code run inside one (a socket made
// there stays there: how tests and benches bind in a host's namespace from their own process),
// and `ip` commands. Linux only; needs CAP_NET_ADMIN.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace stoa::net::netem {

// Opens TUN device `device` (IFF_TUN, no packet info, non-blocking) inside namespace
// /run/netns/<netns>; the device lives while the fd is open. Throws kUnsupported naming the step.
int open_tun_in_netns(const std::string& netns, const std::string& device);

// Runs `fn` on a thread of its own that has entered /run/netns/<netns>; rethrows what it throws.
void run_in_netns(const std::string& netns, const std::function<void()>& fn);

// Runs `ip args...` (prefixed by `ip netns exec <netns>` when netns is not empty); throws
// kUnsupported naming the command and its error output when it fails.
void ip_command(const std::string& netns, const std::vector<std::string>& args);

// Deletes namespace `name` (quietly: it may be gone already).
void delete_netns(const std::string& name);

// Deletes the namespaces named <prefix><pid>... whose process is gone (killed -9, say): what a
// bench or emulator left behind. Every user of namespaces (the emulator, the fleet and swarm
// benches' tbf links) calls it at start with its own prefix.
void remove_stale_namespaces(const std::string& prefix);

// Why the emulator cannot run here (not root, no /dev/net/tun, no iproute2), or "" when it can.
std::string why_netem_unusable();

}  // namespace stoa::net::netem
