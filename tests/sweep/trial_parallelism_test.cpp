#include "hwtrain/sweep/trial_parallelism.h"

#include <gtest/gtest.h>

#include <array>

namespace hwt::sweep {
namespace {

TrialParallelism par_cpu(int cores, int parallel = 0, int max_trials = 0) {
  ParallelismInputs in;
  in.physical_cores = cores;
  in.parallel = parallel;
  in.max_trials = max_trials;
  return decide_trial_parallelism(in);
}

TEST(TrialParallelism, TwoCoresRunTwoTrialsOfOneThread) {
  const TrialParallelism p = par_cpu(2);
  EXPECT_EQ(p.trials_at_once, 2);
  EXPECT_EQ(p.threads_per_trial, 1);
  EXPECT_EQ(p.gpu_of_slot, (std::vector<int>{-1, -1}));
  EXPECT_NE(p.reason.find("2 trials at once x 1 threads on 2 cores"), std::string::npos) << p.reason;
}

TEST(TrialParallelism, CpuDefaultSplitsCoresNearTheirSquareRoot) {
  const std::vector<std::array<int, 3>> expected = {{1, 1, 1}, {4, 2, 2}, {8, 4, 2}, {16, 4, 4}, {64, 8, 8}, {6, 3, 2}};
  for (const auto& [cores, trials, threads] : expected) {
    const TrialParallelism p = par_cpu(cores);
    EXPECT_EQ(p.trials_at_once, trials) << cores << " cores";
    EXPECT_EQ(p.threads_per_trial, threads) << cores << " cores";
  }
}

TEST(TrialParallelism, UserParallelAboveTheCoresIsClampedAndSaysSo) {
  const TrialParallelism p = par_cpu(4, 8);
  EXPECT_EQ(p.trials_at_once, 4);
  EXPECT_EQ(p.threads_per_trial, 1);
  EXPECT_NE(p.reason.find("sweep.parallel = 8 clamped to the 4 physical cores"), std::string::npos) << p.reason;
  const TrialParallelism q = par_cpu(16, 3);
  EXPECT_EQ(q.trials_at_once, 3);
  EXPECT_EQ(q.threads_per_trial, 5);
}

TEST(TrialParallelism, FewTrialsLeftGetTheCoresBetweenThem) {
  const TrialParallelism p = par_cpu(16, 0, 2);
  EXPECT_EQ(p.trials_at_once, 2);
  EXPECT_EQ(p.threads_per_trial, 8);
  EXPECT_NE(p.reason.find("only 2 trials left"), std::string::npos) << p.reason;
}

TEST(TrialParallelism, CpuThreadsNeverExceedTheCores) {
  for (int cores = 0; cores <= 70; ++cores) {
    for (int parallel = 0; parallel <= 75; parallel += 3) {
      const TrialParallelism p = par_cpu(cores, parallel);
      EXPECT_GE(p.trials_at_once, 1);
      EXPECT_GE(p.threads_per_trial, 1);
      EXPECT_LE(p.trials_at_once * p.threads_per_trial, std::max(1, cores)) << cores << " cores, parallel " << parallel;
      EXPECT_EQ(p.gpu_of_slot.size(), static_cast<std::size_t>(p.trials_at_once));
    }
  }
}

TEST(TrialParallelism, OneTrialPerGpuWithoutAMemoryPrediction) {
  ParallelismInputs in;
  in.physical_cores = 16;
  in.num_gpus = 2;
  const TrialParallelism p = decide_trial_parallelism(in);
  EXPECT_EQ(p.trials_at_once, 2);
  EXPECT_EQ(p.threads_per_trial, 8);
  EXPECT_EQ(p.gpu_of_slot, (std::vector<int>{0, 1}));
  in.parallel = 4;  // more than one per GPU, unchecked: honoured with a warning
  const TrialParallelism q = decide_trial_parallelism(in);
  EXPECT_EQ(q.gpu_of_slot, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_NE(q.reason.find("may run out of memory"), std::string::npos) << q.reason;
}

TEST(TrialParallelism, SeveralTrialsShareAGpuWhenTheirPredictedMemoryFits) {
  ParallelismInputs in;
  in.physical_cores = 16;
  in.num_gpus = 1;
  in.gpu_memory_bytes = 80ull << 30;
  in.trial_gpu_bytes = 10ull << 30;  // floor(0.9 * 80 / 10) = 7
  const TrialParallelism p = decide_trial_parallelism(in);
  EXPECT_EQ(p.trials_at_once, 7);
  EXPECT_EQ(p.threads_per_trial, 2);
  EXPECT_EQ(p.gpu_of_slot, std::vector<int>(7, 0));
  in.parallel = 10;
  const TrialParallelism q = decide_trial_parallelism(in);
  EXPECT_EQ(q.trials_at_once, 7);
  EXPECT_NE(q.reason.find("clamped to 7"), std::string::npos) << q.reason;
  in.trial_gpu_bytes = 100ull << 30;  // does not fit even once: still one trial (the trainer will say why)
  in.parallel = 0;
  EXPECT_EQ(decide_trial_parallelism(in).trials_at_once, 1);
}

}  // namespace
}  // namespace hwt::sweep
