// Who and where a sweep process is, so that the study store can tell a dead trial from a live one:
// the host name, a key for "this machine, this pid namespace, this boot" (within which pids can be
// checked), a process's start time (which tells a reused pid from the original), and a liveness
// check. Linux: reads /proc; elsewhere start times are unknown (0) and only kill(pid, 0) is used.
#pragma once
#include <cstdint>
#include <string>

namespace hwt::sweep {

// gethostname(), or "unknown-host" if it fails.
std::string this_host_name();

// "<host> <pid namespace> <boot id>": two processes with the same key see the same pids. Containers
// that share a host name but not a pid namespace, and a machine after a reboot, get other keys.
std::string this_machine_key();

// The start time of process `pid` in clock ticks since boot (/proc/<pid>/stat field 22); 0 when
// unknown (no such process, or no /proc).
std::int64_t process_start_ticks(std::int64_t pid);

// Whether process `pid` on this machine is still the one that started at `start_ticks` (0: any) and
// has not exited: false when the pid is gone, is a zombie, or now names a later process.
bool local_process_alive(std::int64_t pid, std::int64_t start_ticks);

}  // namespace hwt::sweep
