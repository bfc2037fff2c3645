// Reading profiles back: the step-phase trace (trace.json, written by the profiler callback) and
// LibTorch's operator trace (ops_trace.json, Kineto's Chrome-trace JSON) of a run directory.
// top_operators() ranks operators by self time (time not spent in nested operators), as
// PyTorch's key_averages() table does; run_profile_report() prints both tables for
// `hwtrain profile` and `hwtrain profile RUN_DIR`.
#pragma once
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace hwt {

inline constexpr const char* kPhaseTraceFile = "trace.json";
inline constexpr const char* kOpsTraceFile = "ops_trace.json";
// Category of the step-phase events in trace.json.
inline constexpr const char* kPhaseCategory = "step_phase";

struct OpStat {
  std::string name;
  std::string device;  // "cpu" (operators) or "gpu" (kernels)
  int64_t calls = 0;
  double total_ms = 0;  // including nested operators
  double self_ms = 0;   // excluding them (kernels: = total)
};

struct PhaseStat {
  std::string name;  // data_wait, forward, backward, comm, optimizer
  int64_t calls = 0;
  double total_ms = 0;
};

// From a Chrome-trace JSON text (Kineto's): CPU operators ("cpu_op") and GPU kernels ("kernel"),
// sorted by self time, longest first. DataError when the text is not a trace.
std::vector<OpStat> top_operators(const std::string& trace_json);
// Peak "Total Allocated" bytes of the memory events of a Kineto trace per device ("cpu", "gpu");
// empty when memory was not profiled.
std::vector<std::pair<std::string, double>> peak_profiled_memory(const std::string& trace_json);
// Sums of the step-phase events of a trace.json text, in order of first appearance.
std::vector<PhaseStat> phase_summary(const std::string& trace_json);

// Fixed-width tables.
std::string format_top_operators(const std::vector<OpStat>& ops, size_t top_n);
std::string format_phase_summary(const std::vector<PhaseStat>& phases);

// Prints the phase summary and the top `top_n` operators of the profile in `run_dir`; returns 0.
// IoError when the directory holds neither trace (with the command that makes one).
int run_profile_report(const std::filesystem::path& run_dir, size_t top_n, std::ostream& out);

}  // namespace hwt
