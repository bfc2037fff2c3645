// Running the hwtrain binary (or any command) through the shell from a test, and reading what it
// wrote. The exit code follows the shell's convention: 128 + signal for a killed process.
#pragma once
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace hwt::testing {

inline int run_shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

#ifdef HWTRAIN_BINARY
// `hwtrain ARGS` (the binary under test) run in `cwd`, its stdout and stderr into `log` (a path
// relative to cwd).
inline int hwtrain_in(const std::filesystem::path& cwd, const std::string& args, const std::string& log = "/dev/null") {
  return run_shell("cd '" + cwd.string() + "' && " + HWTRAIN_BINARY + " " + args + " > " + log + " 2>&1");
}
#endif

}  // namespace hwt::testing
