// Automatic micro-batch sizing: the candidates, the search (probe count, verdicts), and the
// trainer's probe leaving weights, optimizer state and the training stream as they were.
#include "hwtrain/train/batch_size_probe.h"

#include <gtest/gtest.h>

#include "trainer_fixture.h"

namespace hwt {
namespace {

TEST(BatchSizeProbe, CandidatesDivideThePerRankBatch) {
  EXPECT_EQ(micro_batch_candidates(12, 64), (std::vector<int64_t>{1, 2, 3, 4, 6, 12}));
  EXPECT_EQ(micro_batch_candidates(64, 16), (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(micro_batch_candidates(7, 64), (std::vector<int64_t>{1, 7}));
}

TEST(BatchSizeProbe, FindsTheLargestThatFitsInFewProbes) {
  const auto candidates = micro_batch_candidates(1024, 1024);  // 11 powers of two
  for (int64_t limit : {1, 3, 8, 100, 512, 1024}) {
    std::vector<int64_t> probed;
    auto r = search_micro_batch(candidates, [&](int64_t micro) {
      probed.push_back(micro);
      return ProbeRecord{micro, static_cast<double>(micro), micro <= limit, ""};
    });
    int64_t expected = 1;
    for (int64_t c : candidates) if (c <= limit) expected = c;
    EXPECT_EQ(r.micro_batch_size, expected) << "limit " << limit;
    EXPECT_TRUE(r.found);
    EXPECT_LE(r.probes.size(), static_cast<size_t>(kMaxProbes));
    EXPECT_EQ(probed.front(), 1024);  // the largest first
  }
  auto none = search_micro_batch(candidates, [](int64_t m) { return ProbeRecord{m, 1e12, false, ""}; });
  EXPECT_FALSE(none.found);
  EXPECT_EQ(none.micro_batch_size, 1);
  EXPECT_NE(none.describe(1e9).find("no candidate fits"), std::string::npos);
}

TEST(BatchSizeProbe, TrainerProbeChangesOnlyTheBatchGeometry) {
  torch::set_num_threads(1);
  TrainerFixture f;
  f.plan.micro_batch_size = 8;
  f.plan.grad_accum_steps = 1;
  auto reference = f.make("ref");
  reference->fit();

  f.plan.micro_batch_size = 1;  // the probe must grow it back to 8 under a huge budget
  f.plan.grad_accum_steps = 8;
  f.plan.memory_budget_bytes = 1e15;
  auto probed = f.make("probe");
  BatchProbeResult r = probed->probe_micro_batch();
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.micro_batch_size, 8);
  EXPECT_EQ(r.probes.size(), 1u);
  EXPECT_GT(r.probes[0].peak_bytes, 0);
  EXPECT_EQ(probed->micro_batch_size(), 8);
  EXPECT_EQ(probed->grad_accum_steps(), 1);
  for (const auto& [name, t] : probed->optimizer().state()) {
    EXPECT_EQ(t.abs().sum().item<double>(), 0.0) << name;  // as freshly constructed
  }
  probed->fit();
  EXPECT_EQ(probed->loss_history(), reference->loss_history());  // weights, RNG and data untouched
}

TEST(BatchSizeProbe, TinyBudgetFallsToMicroBatchOne) {
  TrainerFixture f;
  f.plan.micro_batch_size = 8;
  f.plan.grad_accum_steps = 1;
  f.plan.memory_budget_bytes = 1;  // nothing fits
  auto t = f.make("tiny");
  BatchProbeResult r = t->probe_micro_batch();
  EXPECT_FALSE(r.found);
  EXPECT_EQ(t->micro_batch_size(), 1);
  EXPECT_EQ(t->grad_accum_steps(), 8);
  EXPECT_EQ(r.probes.size(), 3u);  // candidates 1 2 4 8: probes 8, then 2, then 1
}

}  // namespace
}  // namespace hwt
