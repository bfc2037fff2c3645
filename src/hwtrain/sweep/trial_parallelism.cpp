#include "hwtrain/sweep/trial_parallelism.h"

#include <algorithm>
#include <cmath>

#include "hwtrain/core/strings.h"

namespace hwt::sweep {
namespace {

int largest_power_of_two_at_most(double x) {
  int p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

std::string trials_text(int n) { return std::to_string(n) + (n == 1 ? " trial" : " trials"); }

TrialParallelism decide_on_cpu(const ParallelismInputs& in, int cores) {
  TrialParallelism out;
  std::string why;
  if (in.parallel > 0) {
    out.trials_at_once = std::min(in.parallel, cores);
    why = in.parallel > cores ? "sweep.parallel = " + std::to_string(in.parallel) + " clamped to the " +
                                    std::to_string(cores) + " physical cores (threads never exceed the cores)"
                              : "sweep.parallel = " + std::to_string(in.parallel);
  } else {
    const int threads = largest_power_of_two_at_most(std::sqrt(static_cast<double>(cores)));
    out.trials_at_once = std::max(1, cores / threads);
    why = "CPU default: ~sqrt(cores) threads per trial, since more threads speed one small model up far "
          "less than running trials side by side";
  }
  if (in.max_trials > 0 && in.max_trials < out.trials_at_once) {
    out.trials_at_once = in.max_trials;
    why += "; only " + trials_text(in.max_trials) + " left to run";
  }
  out.threads_per_trial = std::max(1, cores / out.trials_at_once);
  out.gpu_of_slot.assign(out.trials_at_once, -1);
  out.reason = trials_text(out.trials_at_once) + " at once x " + std::to_string(out.threads_per_trial) +
               " threads on " + std::to_string(cores) + " cores: " + why;
  return out;
}

TrialParallelism decide_on_gpus(const ParallelismInputs& in, int cores) {
  TrialParallelism out;
  int per_gpu = 1;
  std::string why = "one trial per GPU";
  const bool predicted = in.trial_gpu_bytes && *in.trial_gpu_bytes > 0 && in.gpu_memory_bytes > 0;
  if (predicted) {
    const double fit = 0.9 * static_cast<double>(in.gpu_memory_bytes) / static_cast<double>(*in.trial_gpu_bytes);
    per_gpu = std::max(1, static_cast<int>(std::min(fit, 1024.0)));
    why = std::to_string(per_gpu) + " per GPU: a trial is predicted to need " +
          format_bytes(static_cast<double>(*in.trial_gpu_bytes)) + " of 90% of " +
          format_bytes(static_cast<double>(in.gpu_memory_bytes));
  }
  const int capacity = per_gpu * in.num_gpus;
  out.trials_at_once = capacity;
  if (in.parallel > 0) {
    if (in.parallel <= capacity) {
      out.trials_at_once = in.parallel;
      why = "sweep.parallel = " + std::to_string(in.parallel) + " (" + why + " would allow " + std::to_string(capacity) + ")";
    } else if (predicted) {
      why = "sweep.parallel = " + std::to_string(in.parallel) + " clamped to " + std::to_string(capacity) + ": " + why;
    } else {
      out.trials_at_once = in.parallel;
      why = "sweep.parallel = " + std::to_string(in.parallel) +
            " as asked; trial memory is not predicted, so several trials share a GPU unchecked and may run out of memory";
    }
  }
  if (in.max_trials > 0 && in.max_trials < out.trials_at_once) {
    out.trials_at_once = in.max_trials;
    why += "; only " + trials_text(in.max_trials) + " left to run";
  }
  out.threads_per_trial = std::max(1, cores / out.trials_at_once);
  if (out.trials_at_once > cores) why += "; more trials than cores: CPU work is oversubscribed";
  for (int i = 0; i < out.trials_at_once; ++i) out.gpu_of_slot.push_back(i % in.num_gpus);
  out.reason = trials_text(out.trials_at_once) + " at once on " + std::to_string(in.num_gpus) + " GPU" +
               (in.num_gpus == 1 ? "" : "s") + ", " + std::to_string(out.threads_per_trial) +
               " CPU threads each: " + why;
  return out;
}

}  // namespace

TrialParallelism decide_trial_parallelism(const ParallelismInputs& in) {
  const int cores = std::max(1, in.physical_cores);
  return in.num_gpus > 0 ? decide_on_gpus(in, cores) : decide_on_cpu(in, cores);
}

}  // namespace hwt::sweep
