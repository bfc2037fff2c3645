#include "hwtrain/sweep/process_identity.h"

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <optional>
#include <sstream>

namespace hwt::sweep {

namespace {

struct ProcStatFields {
  char state = '?';
  std::int64_t start_ticks = 0;
};

// Fields 3 (state) and 22 (starttime) of /proc/<pid>/stat; field 2, the command name, may hold
// spaces and parentheses, so fields are counted after its last ')'.
std::optional<ProcStatFields> read_proc_stat_fields(std::int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  ProcStatFields out;
  fields >> out.state;
  std::string skipped;
  for (int field = 4; field < 22; ++field) fields >> skipped;
  fields >> out.start_ticks;
  if (!fields) return std::nullopt;
  return out;
}

std::string first_line_of(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string this_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown-host";
  return name;
}

std::string this_machine_key() {
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  const std::string pid_namespace = n > 0 ? std::string(ns, static_cast<std::size_t>(n)) : "";
  return this_host_name() + " " + pid_namespace + " " + first_line_of("/proc/sys/kernel/random/boot_id");
}

std::int64_t process_start_ticks(std::int64_t pid) {
  const auto fields = read_proc_stat_fields(pid);
  return fields ? fields->start_ticks : 0;
}

bool local_process_alive(std::int64_t pid, std::int64_t start_ticks) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;  // EPERM: exists, not ours
  const auto fields = read_proc_stat_fields(pid);
  if (!fields) return true;  // no /proc to look closer (or it just exited): kill() said it exists
  if (fields->state == 'Z' || fields->state == 'X') return false;  // exited, not yet reaped
  return start_ticks == 0 || fields->start_ticks == start_ticks;    // else the pid names a later process
}

}  // namespace hwt::sweep
