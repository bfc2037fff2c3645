// ObsConfig: what a run records and where (metrics sinks, progress display, hardware monitor).
// Header-only plain struct.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/core/enum_names.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"

namespace hwt {

// How progress is shown: a redrawn bar (a terminal) or one line per report (logs, pipes).
enum class ProgressMode { bar, lines };
template <>
struct EnumNames<ProgressMode> {
  static constexpr std::array<std::pair<ProgressMode, const char*>, 2> table{{
      {ProgressMode::bar, "bar"},
      {ProgressMode::lines, "lines"}}};
};

struct ObsConfig {
  // Each option is described once, by its visit() line below (printed by --help-config).
  std::optional<ProgressMode> progress;  // empty = auto: a bar on a terminal, lines otherwise
  bool jsonl = true;
  bool csv = true;
  bool tensorboard = true;
  double flush_seconds = 10.0;
  double gpu_log_interval = 10.0;
  bool report = true;
  std::string profile_steps = "";

  void validate() const {
    check_positive("log.flush_seconds", flush_seconds);
    check_non_negative("log.gpu_log_interval", gpu_log_interval, "0 = off");
    if (!profile_steps.empty()) check_profile_steps(profile_steps);
  }
  static void check_profile_steps(const std::string& spec) {
    if (valid_step_range(spec)) return;
    throw ConfigError("config: log.profile_steps = '" + spec +
                      "' is not valid: expected a:b with 1 <= a <= b (training steps, inclusive), e.g. 10:15");
  }
  // "a:b" with decimal 1 <= a <= b, at most 12 digits each: the one rule (train/profiler_callback.h's
  // parse_profile_steps reads what it accepts).
  static bool valid_step_range(const std::string& s) {
    const size_t colon = s.find(':');
    auto digits = [](const std::string& t) {
      return !t.empty() && t.size() <= 12 && t.find_first_not_of("0123456789") == std::string::npos;
    };
    if (colon == std::string::npos || !digits(s.substr(0, colon)) || !digits(s.substr(colon + 1))) return false;
    const long long first = std::stoll(s.substr(0, colon));
    return first >= 1 && first <= std::stoll(s.substr(colon + 1));
  }

  template <class V>
  void visit(V& v) {
    v("progress", progress, "progress display: auto (a bar on a terminal, lines otherwise), bar or lines");
    v("jsonl", jsonl, "write metrics.jsonl in the run directory");
    v("csv", csv, "write metrics.csv in the run directory");
    v("tensorboard", tensorboard, "write TensorBoard event files under <run dir>/tb");
    v("flush_seconds", flush_seconds, "metric sinks flush at least this often, in seconds (and on exit)");
    v("gpu_log_interval", gpu_log_interval, "seconds between hardware monitor samples; 0 = off");
    v("report", report, "write report.html at the end");
    v("profile_steps", profile_steps, "a:b writes a Chrome trace of steps a to b");
  }
};

}  // namespace hwt
