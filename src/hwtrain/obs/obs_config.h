// ObsConfig: what a run records and where (metrics sinks, progress display, hardware monitor).
// Header-only plain struct.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"

namespace hwt {

struct ObsConfig {
  std::string progress = "auto";  // auto (bar on a terminal, lines otherwise) | bar | lines
  bool jsonl = true;              // metrics.jsonl in the run directory
  bool csv = true;                // metrics.csv in the run directory
  bool tensorboard = true;        // TensorBoard event file under <run dir>/tb
  double flush_seconds = 10.0;    // sinks flush at least this often (and on exit)
  double gpu_log_interval = 10.0; // seconds between hardware monitor samples; 0 = off
  bool report = true;             // write report.html at the end of the run
  std::string profile_steps = ""; // "a:b" writes a Chrome trace of steps a..b

  void validate() const {
    check_positive("log.flush_seconds", flush_seconds);
    check_non_negative("log.gpu_log_interval", gpu_log_interval, "0 = off");
    if (!profile_steps.empty() && !valid_step_range(profile_steps)) {
      throw ConfigError("config: log.profile_steps = '" + profile_steps +
                        "' is not valid: expected a:b with a <= b, e.g. 10:20");
    }
  }
  // "a:b" with decimal a <= b.
  static bool valid_step_range(const std::string& s) {
    const size_t colon = s.find(':');
    auto digits = [](const std::string& t) {
      return !t.empty() && t.size() < 18 && t.find_first_not_of("0123456789") == std::string::npos;
    };
    if (colon == std::string::npos || !digits(s.substr(0, colon)) || !digits(s.substr(colon + 1))) return false;
    return std::stoll(s.substr(0, colon)) <= std::stoll(s.substr(colon + 1));
  }

  template <class V>
  void visit(V& v) {
    v("progress", progress, "progress display", std::vector<std::string>{"auto", "bar", "lines"});
    v("jsonl", jsonl, "write metrics.jsonl");
    v("csv", csv, "write metrics.csv");
    v("tensorboard", tensorboard, "write TensorBoard event files");
    v("flush_seconds", flush_seconds, "seconds between sink flushes");
    v("gpu_log_interval", gpu_log_interval, "seconds between hardware monitor samples; 0 = off");
    v("report", report, "write report.html at the end");
    v("profile_steps", profile_steps, "a:b writes a Chrome trace of steps a to b");
  }
};

}  // namespace hwt
