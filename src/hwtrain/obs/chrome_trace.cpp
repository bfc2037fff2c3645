#include "hwtrain/obs/chrome_trace.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "hwtrain/core/files.h"

namespace hwt {

namespace {

using ojson = nlohmann::ordered_json;

// Nanosecond resolution is all the format can use; rounding keeps the file short.
double round_ns(double us) { return std::round(us * 1000.0) / 1000.0; }

ojson to_json_event(const TraceEvent& e) {
  ojson j;
  j["name"] = e.name;
  if (!e.category.empty()) j["cat"] = e.category;
  j["ph"] = std::string(1, e.phase);
  if (e.phase != 'M') j["ts"] = round_ns(e.ts_us);
  if (e.phase == 'X') j["dur"] = round_ns(e.dur_us);
  if (e.phase == 'i') j["s"] = "t";  // instant scoped to its thread
  j["pid"] = e.pid;
  j["tid"] = e.tid;
  if (!e.args.empty() || !e.text_args.empty()) {
    ojson args = ojson::object();
    for (const auto& [k, v] : e.args) {
      if (std::isfinite(v)) args[k] = v;
    }
    for (const auto& [k, v] : e.text_args) args[k] = v;
    j["args"] = std::move(args);
  }
  return j;
}

}  // namespace

void ChromeTrace::set_process_name(int64_t pid, const std::string& name) {
  TraceEvent e;
  e.name = "process_name";
  e.phase = 'M';
  e.pid = pid;
  e.text_args = {{"name", name}};
  metadata_.push_back(std::move(e));
}

void ChromeTrace::set_thread_name(int64_t pid, int64_t tid, const std::string& name) {
  TraceEvent e;
  e.name = "thread_name";
  e.phase = 'M';
  e.pid = pid;
  e.tid = tid;
  e.text_args = {{"name", name}};
  metadata_.push_back(std::move(e));
}

void ChromeTrace::add_complete(const std::string& name, const std::string& category, double start_seconds,
                               double duration_seconds, int64_t pid, int64_t tid,
                               std::vector<std::pair<std::string, double>> args) {
  if (!std::isfinite(start_seconds) || !std::isfinite(duration_seconds)) return;
  TraceEvent e;
  e.name = name;
  e.category = category;
  e.phase = 'X';
  e.ts_us = start_seconds * 1e6;
  e.dur_us = std::max(0.0, duration_seconds * 1e6);
  e.pid = pid;
  e.tid = tid;
  e.args = std::move(args);
  events_.push_back(std::move(e));
}

void ChromeTrace::add_counter(const std::string& name, double time_seconds,
                              std::vector<std::pair<std::string, double>> series, int64_t pid) {
  if (!std::isfinite(time_seconds)) return;
  series.erase(std::remove_if(series.begin(), series.end(), [](const auto& s) { return !std::isfinite(s.second); }),
               series.end());
  if (series.empty()) return;
  TraceEvent e;
  e.name = name;
  e.phase = 'C';
  e.ts_us = time_seconds * 1e6;
  e.pid = pid;
  e.args = std::move(series);
  events_.push_back(std::move(e));
}

void ChromeTrace::add_instant(const std::string& name, const std::string& category, double time_seconds, int64_t pid,
                              int64_t tid) {
  if (!std::isfinite(time_seconds)) return;
  TraceEvent e;
  e.name = name;
  e.category = category;
  e.phase = 'i';
  e.ts_us = time_seconds * 1e6;
  e.pid = pid;
  e.tid = tid;
  events_.push_back(std::move(e));
}

void ChromeTrace::add(TraceEvent e) {
  if (e.phase == 'M') {
    metadata_.push_back(std::move(e));
  } else if (std::isfinite(e.ts_us) && std::isfinite(e.dur_us)) {
    events_.push_back(std::move(e));
  }
}

std::string ChromeTrace::to_json() const {
  std::vector<const TraceEvent*> order;
  order.reserve(events_.size());
  for (const auto& e : events_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const TraceEvent* a, const TraceEvent* b) {
    if (a->ts_us != b->ts_us) return a->ts_us < b->ts_us;
    return a->dur_us > b->dur_us;
  });
  // One event per line: diffable, and still small.
  std::string out = "{\"traceEvents\": [\n";
  const size_t total = metadata_.size() + order.size();
  size_t written = 0;
  auto append = [&](const TraceEvent& e) {
    out += to_json_event(e).dump();
    out += ++written < total ? ",\n" : "\n";
  };
  for (const auto& e : metadata_) append(e);
  for (const auto* e : order) append(*e);
  out += "], \"displayTimeUnit\": \"ms\"}\n";
  return out;
}

void ChromeTrace::write(const std::filesystem::path& path) const { write_file_atomic(path, to_json()); }

}  // namespace hwt
