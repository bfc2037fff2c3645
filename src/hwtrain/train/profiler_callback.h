// ProfilerCallback: `--profile-steps a:b` (log.profile_steps). For training steps a..b (1-based,
// inclusive) it writes two Chrome traces into the run directory, both viewable in Perfetto:
//  - trace.json: the step phases on a timeline (data wait, forward, backward, communication,
//    optimizer) rebuilt from each step's StepMetrics, plus loss/throughput/memory counters. The
//    trainer times forward and backward summed over micro-batches, so each is drawn as one block.
//  - ops_trace.json: LibTorch's profiler (every operator, GPU kernels, allocations), with one
//    "ProfilerStep#N" range per step; absent where the profiler is unavailable.
// Profiling starts at the end of step a-1, so an evaluation scheduled at step a-1 is recorded too.
// `hwtrain profile` reads both back (obs/profile_report.h).
#pragma once
#include <memory>

#include "hwtrain/obs/chrome_trace.h"
#include "hwtrain/train/callback.h"
#include "hwtrain/train/torch_profiler.h"

namespace hwt {

struct ProfileRange {
  int64_t first = 0, last = 0;  // 1-based training steps, inclusive
  bool contains(int64_t step) const { return step >= first && step <= last; }
};

// "a:b" with 1 <= a <= b; ConfigError naming log.profile_steps otherwise.
ProfileRange parse_profile_steps(const std::string& spec);

// "trace.json" for rank 0, "trace.rank3.json" for rank 3.
std::string rank_file_name(const std::string& file_name, int rank);

struct ProfilerOptions {
  ProfileRange steps;
  bool operators = true;  // LibTorch's operator profiler (ops_trace.json)
  int rank = 0;           // ranks other than 0 write trace.rank<N>.json and ops_trace.rank<N>.json
  TorchProfilerOptions torch;
};

class ProfilerCallback : public Callback {
 public:
  explicit ProfilerCallback(ProfilerOptions options);
  std::string name() const override { return "profiler"; }
  void on_train_begin(TrainerControl& t) override;
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;
  void on_train_end(TrainerControl& t) override;

  // Where the traces went (empty until written).
  const std::filesystem::path& phase_trace_path() const { return phase_trace_path_; }
  const std::filesystem::path& ops_trace_path() const { return ops_trace_path_; }

 private:
  void start_operators(int64_t first_step);
  void add_step(const StepMetrics& m);
  void finish();

  ProfilerOptions options_;
  std::filesystem::path run_dir_;
  ChromeTrace trace_;
  int64_t num_steps_ = 0;
  bool finished_ = false;
  std::unique_ptr<TorchProfiler> profiler_;
  std::filesystem::path phase_trace_path_, ops_trace_path_;
};

}  // namespace hwt
