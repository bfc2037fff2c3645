// How many trials of a sweep run at once on this machine and what each one gets (CPU threads, a
// GPU), as a pure function of the machine and the user's `parallel`, with the reason in words.
// It does not detect hardware or predict memory: the caller passes both (the planner knows them).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hwt::sweep {

struct ParallelismInputs {
  int physical_cores = 1;  // physical, not logical: hyper-threads add little to dense math
  int num_gpus = 0;        // 0 = trials run on the CPU
  std::uint64_t gpu_memory_bytes = 0;             // per GPU; 0 = unknown
  std::optional<std::uint64_t> trial_gpu_bytes;   // a trial's predicted peak GPU memory, when known
  int parallel = 0;        // the user's sweep.parallel; 0 = decide here
  int max_trials = 0;      // trials left to run; > 0 caps trials_at_once (no idle slots); 0 = no cap
};

struct TrialParallelism {
  int trials_at_once = 1;
  int threads_per_trial = 1;    // optimization.intra_op_threads of each trial
  std::vector<int> gpu_of_slot;  // slot i runs on this GPU index, -1 = CPU; size trials_at_once
  std::string reason;            // one line, printed once by the sweep command
};

// CPU, default: t = the largest power of two <= sqrt(cores) threads per trial and cores / t trials
// (2 cores: 2 x 1, 4: 2 x 2, 8: 4 x 2, 16: 4 x 4, 64: 8 x 8). Intra-op threads speed one small
// model up far less than linearly, so several trials side by side finish a sweep sooner, while a
// few threads each keep every trial's own time reasonable. Threads never add up past the cores:
// a user `parallel` above the cores is clamped to the cores, and said so.
// GPU: one trial per GPU; several per GPU when the predicted memory of k trials fits in 90% of a GPU
// (k = floor(0.9 * gpu_memory / trial_gpu_bytes)); slots go round-robin over the GPUs; CPU threads
// are shared out among the trials. A user `parallel` above that capacity is clamped when the memory
// is predicted, and honoured (with a warning in the reason) when it is not.
TrialParallelism decide_trial_parallelism(const ParallelismInputs& in);

}  // namespace hwt::sweep
