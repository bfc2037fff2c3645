// ChromeTrace: collects timeline events and writes them in the Chrome Trace Event format (JSON
// object form), which Perfetto (ui.perfetto.dev) and chrome://tracing open. Times are given in
// seconds and written in microseconds, as the format requires. Events are written ordered by
// time (metadata first; at equal times, longer events first so that parents precede children).
// Only what hwtrain draws: complete events ("X"), counters ("C"), instants ("i"), and process and
// thread names ("M").
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace hwt {

struct TraceEvent {
  std::string name;
  std::string category;
  char phase = 'X';
  double ts_us = 0;   // start, microseconds from the trace's origin
  double dur_us = 0;  // complete events only
  int64_t pid = 0, tid = 0;
  std::vector<std::pair<std::string, double>> args;  // counters: one series per arg
  std::vector<std::pair<std::string, std::string>> text_args;
};

class ChromeTrace {
 public:
  void set_process_name(int64_t pid, const std::string& name);
  void set_thread_name(int64_t pid, int64_t tid, const std::string& name);
  // Events with non-finite times are dropped; negative durations become 0.
  void add_complete(const std::string& name, const std::string& category, double start_seconds, double duration_seconds,
                    int64_t pid, int64_t tid, std::vector<std::pair<std::string, double>> args = {});
  void add_counter(const std::string& name, double time_seconds, std::vector<std::pair<std::string, double>> series,
                   int64_t pid = 0);
  void add_instant(const std::string& name, const std::string& category, double time_seconds, int64_t pid, int64_t tid);
  void add(TraceEvent e);

  size_t num_events() const { return events_.size(); }
  const std::vector<TraceEvent>& events() const { return events_; }

  // {"traceEvents": [...], "displayTimeUnit": "ms"}
  std::string to_json() const;
  // Writes to_json() atomically; IoError naming the path on failure.
  void write(const std::filesystem::path& path) const;

 private:
  std::vector<TraceEvent> metadata_;
  std::vector<TraceEvent> events_;
};

}  // namespace hwt
