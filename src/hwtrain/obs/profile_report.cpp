#include "hwtrain/obs/profile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"

namespace hwt {

namespace {

using json = nlohmann::json;

const json& trace_events(const json& doc) {
  if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array()) return doc["traceEvents"];
  if (doc.is_array()) return doc;  // the format's array form
  throw DataError("not a Chrome trace: no \"traceEvents\" list");
}

json parse_trace(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw DataError(std::string("not a Chrome trace: invalid JSON (") + e.what() + ")");
  }
}

double number_or(const json& e, const char* key, double fallback) {
  auto it = e.find(key);
  return it != e.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string text_or(const json& e, const char* key) {
  auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}

struct Span {
  double start, end;
  size_t stat;  // index into the stats
};

}  // namespace

std::vector<OpStat> top_operators(const std::string& trace_json) {
  const json doc = parse_trace(trace_json);
  std::vector<OpStat> stats;
  std::unordered_map<std::string, size_t> index;  // device + name -> stats
  auto stat_for = [&](const std::string& name, const std::string& device) -> size_t {
    auto [it, added] = index.emplace(device + '\0' + name, stats.size());
    if (added) stats.push_back({name, device, 0, 0, 0});
    return it->second;
  };
  // CPU operators nest on their thread; self time subtracts the direct children.
  std::map<std::string, std::vector<Span>> cpu_by_thread;  // pid/tid (they may be strings) -> spans
  for (const auto& e : trace_events(doc)) {
    if (!e.is_object() || text_or(e, "ph") != "X") continue;
    const std::string cat = text_or(e, "cat");
    const double ts = number_or(e, "ts", 0), dur = std::max(0.0, number_or(e, "dur", 0));
    if (cat == "cpu_op") {
      const std::string thread = e.value("pid", json()).dump() + "/" + e.value("tid", json()).dump();
      cpu_by_thread[thread].push_back({ts, ts + dur, stat_for(text_or(e, "name"), "cpu")});
    } else if (cat == "kernel") {
      auto& s = stats[stat_for(text_or(e, "name"), "gpu")];
      ++s.calls;
      s.total_ms += dur / 1000.0;
      s.self_ms += dur / 1000.0;
    }
  }
  for (auto& [thread, spans] : cpu_by_thread) {
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
    std::vector<std::pair<const Span*, double>> stack;  // open span, time of its direct children
    auto close = [&] {
      const auto& [span, children] = stack.back();
      auto& s = stats[span->stat];
      const double dur = span->end - span->start;
      ++s.calls;
      s.total_ms += dur / 1000.0;
      s.self_ms += std::max(0.0, dur - children) / 1000.0;
      stack.pop_back();
      if (!stack.empty()) stack.back().second += dur;
    };
    for (const auto& span : spans) {
      while (!stack.empty() && stack.back().first->end <= span.start) close();
      stack.emplace_back(&span, 0.0);
    }
    while (!stack.empty()) close();
  }
  std::stable_sort(stats.begin(), stats.end(), [](const OpStat& a, const OpStat& b) { return a.self_ms > b.self_ms; });
  return stats;
}

std::vector<std::pair<std::string, double>> peak_profiled_memory(const std::string& trace_json) {
  const json doc = parse_trace(trace_json);
  std::map<std::string, double> peak;
  for (const auto& e : trace_events(doc)) {
    if (!e.is_object() || text_or(e, "name") != "[memory]" || !e.contains("args")) continue;
    const json& args = e["args"];
    if (!args.is_object()) continue;
    const double allocated = number_or(args, "Total Allocated", -1);
    if (allocated < 0) continue;
    // Kineto writes the c10::DeviceType number: 0 is CPU, 1 is CUDA.
    const double type = number_or(args, "Device Type", 0);
    const std::string device = type == 0 ? "cpu" : "gpu";
    peak[device] = std::max(peak[device], allocated);
  }
  return {peak.begin(), peak.end()};
}

std::vector<PhaseStat> phase_summary(const std::string& trace_json) {
  const json doc = parse_trace(trace_json);
  std::vector<PhaseStat> phases;
  for (const auto& e : trace_events(doc)) {
    if (!e.is_object() || text_or(e, "ph") != "X" || text_or(e, "cat") != kPhaseCategory) continue;
    const std::string name = text_or(e, "name");
    auto it = std::find_if(phases.begin(), phases.end(), [&](const PhaseStat& p) { return p.name == name; });
    if (it == phases.end()) it = phases.insert(phases.end(), PhaseStat{name, 0, 0});
    ++it->calls;
    it->total_ms += std::max(0.0, number_or(e, "dur", 0)) / 1000.0;
  }
  return phases;
}

std::string format_top_operators(const std::vector<OpStat>& ops, size_t top_n) {
  double self_total = 0;
  for (const auto& op : ops) self_total += op.self_ms;
  // Long names (aten::_scaled_dot_product_flash_attention_for_cpu_backward) differ at the end:
  // shortened in the middle.
  constexpr size_t kWidth = 56;
  std::string out = fmt::format("{:<56} {:>6} {:>8} {:>12} {:>12} {:>7}\n", "operator", "device", "calls", "total ms",
                                "self ms", "self %");
  for (size_t i = 0; i < ops.size() && i < top_n; ++i) {
    const auto& op = ops[i];
    std::string name = op.name;
    if (name.size() > kWidth)
      name = name.substr(0, kWidth / 2 - 2) + "..." + name.substr(name.size() - (kWidth / 2 - 1));
    out += fmt::format("{:<56} {:>6} {:>8} {:>12.3f} {:>12.3f} {:>6.1f}%\n", name, op.device, op.calls, op.total_ms,
                       op.self_ms, self_total > 0 ? 100.0 * op.self_ms / self_total : 0.0);
  }
  return out;
}

std::string format_phase_summary(const std::vector<PhaseStat>& phases) {
  double total = 0;
  int64_t steps = 0;
  for (const auto& p : phases) {
    total += p.total_ms;
    steps = std::max(steps, p.calls);
  }
  std::string out = fmt::format("{:<12} {:>12} {:>12} {:>7}\n", "phase", "total ms", "ms/step", "share");
  for (const auto& p : phases) {
    out += fmt::format("{:<12} {:>12.3f} {:>12.3f} {:>6.1f}%\n", p.name, p.total_ms,
                       steps > 0 ? p.total_ms / static_cast<double>(steps) : 0.0,
                       total > 0 ? 100.0 * p.total_ms / total : 0.0);
  }
  return out;
}

int run_profile_report(const std::filesystem::path& run_dir, size_t top_n, std::ostream& out) {
  const auto phases_path = run_dir / kPhaseTraceFile;
  const auto ops_path = run_dir / kOpsTraceFile;
  std::error_code ec;
  const bool have_phases = std::filesystem::is_regular_file(phases_path, ec);
  const bool have_ops = std::filesystem::is_regular_file(ops_path, ec);
  if (!have_phases && !have_ops) {
    throw IoError(run_dir.string() + " holds no profile (" + kPhaseTraceFile + " or " + kOpsTraceFile +
                  "); make one with 'hwtrain train --profile-steps 5:10' or 'hwtrain profile'");
  }
  if (have_phases) {
    out << "step phases (" << phases_path.string() << "):\n"
        << format_phase_summary(phase_summary(read_file(phases_path)));
  }
  if (have_ops) {
    const std::string text = read_file(ops_path);
    auto ops = top_operators(text);
    out << "\ntop " << std::min(top_n, ops.size()) << " of " << ops.size() << " operators by self time ("
        << ops_path.string() << "):\n"
        << format_top_operators(ops, top_n);
    for (const auto& [device, bytes] : peak_profiled_memory(text)) {
      out << "peak allocated on " << device << " while profiled: " << format_bytes(bytes) << "\n";
    }
  } else {
    out << "\nno operator trace (" << kOpsTraceFile << "): LibTorch's profiler was not available for this run\n";
  }
  return 0;
}

}  // namespace hwt
