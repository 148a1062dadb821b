// What a bench records about the machine it ran on and the process it measured: how busy the
// machine was (load average), the CPU's name, this process's CPU seconds and a process's
// resident memory (/proc/<pid>/status). One set for every bench (bench/, app/fleet, the engine
// bench), so their reports mean the same by the same words. Linux only, like the rest of Stoa;
// where /proc or getloadavg is unavailable the readers return their documented "unknown" value
// instead of throwing: a bench's figures stand without them.
#pragma once
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>

namespace stoa {

// The 1, 5 and 15 minute load averages; -1 each where unavailable. Other work on the machine
// inflates wall-clock figures: a report says how busy the machine was.
std::array<double, 3> load_averages();
// The 1 minute load average; -1 where unavailable.
double load_average_1m();

// User + system CPU seconds of this process, all its threads (CLOCK_PROCESS_CPUTIME_ID). On a
// shared machine wall time also counts the time the scheduler gave to others; this does not.
double process_cpu_seconds();

// The first "model name" of /proc/cpuinfo; "unknown" where there is none (e.g. some ARM kernels).
std::string cpu_model_name();

struct ProcessMemory {
  uint64_t rss_bytes = 0;  // VmRSS: resident now
  uint64_t hwm_bytes = 0;  // VmHWM: the peak resident set so far
};
// A process's memory from /proc/<pid>/status; zeros when the process is gone (or no /proc).
ProcessMemory read_process_memory(pid_t pid);
// This process's (/proc/self/status).
ProcessMemory own_process_memory();

}  // namespace stoa
