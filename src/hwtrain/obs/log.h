// The one logger of hwtrain (spdlog). In distributed runs only rank 0 prints info-level lines;
// warnings and errors print on every rank, prefixed with it (unless `hwtrain launch` started the
// rank: it prefixes every line itself, and says so in kLauncherPrefixesEnv). warn_once() says a thing once per
// process (a fallback taken, a setting overridden), however often the code path runs.
#pragma once
#include <spdlog/spdlog.h>

#include <string>

namespace hwt {

// Set by `hwtrain launch` for its ranks: their lines reach the terminal prefixed "[rank r] " already.
inline constexpr const char* kLauncherPrefixesEnv = "HWTRAIN_LAUNCHER_PREFIXES";

// Configures the logger: `rank` < 0 for single-process runs; `level` is spdlog's name.
void init_logging(int rank = -1, const std::string& level = "info");

// The shared logger.
spdlog::logger& logger();

// True on rank 0 or in single-process runs.
bool is_log_rank();

template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  if (is_log_rank()) logger().info(f, std::forward<Args>(args)...);
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  logger().warn(f, std::forward<Args>(args)...);
}
template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  if (is_log_rank()) logger().debug(f, std::forward<Args>(args)...);
}

// Logs `message` as a warning the first time `key` is seen in this process.
void warn_once(const std::string& key, const std::string& message);

}  // namespace hwt
