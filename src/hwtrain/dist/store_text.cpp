#include "hwtrain/dist/store_text.h"

#include <c10/util/Exception.h>

#include <sstream>
#include <thread>

#include "hwtrain/core/strings.h"

namespace hwt {

std::string error_text(const std::exception& e) {
  auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string s = c10_error ? c10_error->what_without_backtrace() : e.what();
  const size_t nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find("] ");
    if (close != std::string::npos && s.find(':') < close) s.erase(0, close + 2);
  }
  return s;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  std::ostringstream s;
  s << static_cast<double>(ms.count()) / 1000.0 << " s";
  return s.str();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (int r : ranks) parts.push_back(std::to_string(r));
  return (ranks.size() == 1 ? "rank " : "ranks ") + join(parts);
}

std::vector<int> wait_for_rank_keys(c10d::Store& store, const std::string& prefix, int world_size,
                                    std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing;
  for (;;) {
    missing.clear();
    for (int r = 0; r < world_size; ++r) {
      if (!store.check({prefix + std::to_string(r)})) missing.push_back(r);
    }
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) return missing;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace hwt
