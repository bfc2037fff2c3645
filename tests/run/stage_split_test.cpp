// The pipeline's cut: contiguous stages of at least one block, the most expensive stage as cheap
// as any cut allows (checked against every cut of small cases), the LM head's cost moving blocks
// off the last stage, and too many stages refused naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "hwtrain/core/error.h"
#include "hwtrain/plan/stage_split.h"

namespace hwt {
namespace {

double worst(const std::vector<StageRange>& cut, const std::vector<double>& cost, double first, double last) {
  double w = 0;
  for (size_t s = 0; s < cut.size(); ++s) {
    double c = 0;
    for (int64_t b = cut[s].begin; b < cut[s].end; ++b) c += cost[static_cast<size_t>(b)];
    if (s == 0) c += first;
    if (s + 1 == cut.size()) c += last;
    w = std::max(w, c);
  }
  return w;
}

// The best worst stage over every cut, by enumeration.
double brute_force(const std::vector<double>& cost, double first, double last, int64_t stages) {
  const int64_t L = static_cast<int64_t>(cost.size());
  double best = 1e300;
  std::vector<StageRange> cut;
  std::function<void(int64_t)> place = [&](int64_t begin) {
    if (static_cast<int64_t>(cut.size()) == stages - 1) {
      cut.push_back({begin, L});
      best = std::min(best, worst(cut, cost, first, last));
      cut.pop_back();
      return;
    }
    for (int64_t end = begin + 1; end <= L - (stages - 1 - static_cast<int64_t>(cut.size())); ++end) {
      cut.push_back({begin, end});
      place(end);
      cut.pop_back();
    }
  };
  place(0);
  return best;
}

TEST(StageSplit, TheCutIsContiguousAndAsBalancedAsAnyCut) {
  const std::vector<double> cost{3, 1, 4, 1, 5, 9, 2, 6};
  for (int64_t p = 1; p <= 8; ++p) {
    for (double last : {0.0, 7.0}) {
      const auto cut = balance_stages(cost, 1.0, last, p);
      ASSERT_EQ(static_cast<int64_t>(cut.size()), p);
      EXPECT_EQ(cut.front().begin, 0);
      EXPECT_EQ(cut.back().end, 8);
      for (size_t s = 0; s < cut.size(); ++s) {
        EXPECT_LT(cut[s].begin, cut[s].end);
        if (s > 0) {
          EXPECT_EQ(cut[s].begin, cut[s - 1].end);
        }
      }
      EXPECT_DOUBLE_EQ(worst(cut, cost, 1.0, last), brute_force(cost, 1.0, last, p)) << "p " << p;
    }
  }
}

TEST(StageSplit, TheLmHeadTakesBlocksOffTheLastStage) {
  ModelConfig m;
  m.preset = "";
  m.n_layer = 12;
  m.n_head = 12;
  m.n_embd = 768;
  m.block_size = 1024;
  const auto even = split_decoder(m, 2, 2);  // a negligible head: 6 | 6
  EXPECT_EQ(even[0].end, 6);
  const auto gpt2 = split_decoder(m, 50257, 2);  // GPT-2's head is about 2 blocks' worth
  EXPECT_GT(gpt2[0].end, 6);
  EXPECT_EQ(describe_stages(gpt2), "blocks 0-" + std::to_string(gpt2[0].end - 1) + " | " +
                                       std::to_string(gpt2[0].end) + "-11");
}

TEST(StageSplit, MoreStagesThanBlocksAreRefusedNamingTheKey) {
  try {
    balance_stages({1, 1}, 0, 0, 3);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dist.pipeline_parallel = 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hwt
