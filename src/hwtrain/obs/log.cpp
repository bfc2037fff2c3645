#include "hwtrain/obs/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>
#include <set>

namespace hwt {

namespace {
int g_rank = -1;
std::shared_ptr<spdlog::logger> make_logger() {
  auto l = spdlog::stderr_color_mt("hwtrain");
  l->set_pattern("%v");
  return l;
}
}  // namespace

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> l = make_logger();
  return *l;
}

void init_logging(int rank, const std::string& level) {
  g_rank = rank;
  auto& l = logger();
  l.set_level(spdlog::level::from_str(level));
  const char* launched = std::getenv(kLauncherPrefixesEnv);
  if (rank >= 0 && !(launched && std::string(launched) == "1")) {
    l.set_pattern("[rank " + std::to_string(rank) + "] %v");
  } else {
    l.set_pattern("%v");
  }
}

bool is_log_rank() { return g_rank <= 0; }

void warn_once(const std::string& key, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.insert(key).second) logger().warn("warning: {}", message);
}

}  // namespace hwt
