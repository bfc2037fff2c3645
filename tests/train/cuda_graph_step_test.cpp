// CudaGraphStep's bookkeeping, which runs everywhere: the warm-up, and the fallback to eager steps
// when a step cannot be captured (here a batch on the CPU), said once with its reason. The capture
// and replay themselves run on a GPU (tests/train/cuda_trainer_test.cpp).
#include "hwtrain/train/cuda_graph_step.h"

#include <gtest/gtest.h>

namespace hwt {
namespace cuda_graph_step_test {
namespace {

struct Counting {
  int forward_backward_calls = 0;
  std::string obstacle;
  torch::Tensor weight = torch::ones({4}, torch::requires_grad());
  AdamW optimizer{{{"w", weight}}, {}, AdamWOptions{}};

  GraphedStep step() {
    GraphedStep s;
    s.forward_backward = [this](const torch::Tensor&, const torch::Tensor&) {
      ++forward_backward_calls;
      return torch::zeros({1});
    };
    s.parameters = [this] { return std::vector<torch::Tensor>{weight}; };
    s.optimizer = [this]() -> AdamW& { return optimizer; };
    s.low_precision = [] { return true; };
    s.signature = [] { return std::string("bf16, micro-batch 2 x 1"); };
    s.obstacle = [this] { return obstacle; };
    return s;
  }
};

TEST(CudaGraphStep, WarmsUpThenFallsBackWithItsReasonWhenTheStepCannotBeCaptured) {
  Counting c;
  CudaGraphStep graph(c.step(), 3);
  EXPECT_FALSE(graph.wants());
  graph.count_eager_step();
  graph.count_eager_step();
  EXPECT_FALSE(graph.wants());
  graph.count_eager_step();
  ASSERT_TRUE(graph.wants());
  const auto x = torch::zeros({2, 8}, torch::kLong);
  EXPECT_FALSE(graph.run(x, x, 1e-3, 4).has_value());
  EXPECT_FALSE(graph.captured());
  graph.count_eager_step();
  EXPECT_FALSE(graph.wants()) << "a failed capture stops the replays for good";
  EXPECT_EQ(graph.replays(), 0);
  EXPECT_EQ(c.forward_backward_calls, 0) << "nothing ran: the caller runs the step eagerly";
#ifdef HWTRAIN_CUDA
  EXPECT_NE(graph.stop_reason().find("capturing step 4 failed (the batch is on cpu"), std::string::npos)
      << graph.stop_reason();
#else
  EXPECT_NE(graph.stop_reason().find("no CUDA"), std::string::npos) << graph.stop_reason();
#endif
  EXPECT_FALSE(graph.run(x, x, 1e-3, 5).has_value());  // stays stopped
}

TEST(CudaGraphStep, AnObstacleStopsTheReplaysBeforeAnyCapture) {
  Counting c;
  c.obstacle = "a gradient sync across ranks";
  CudaGraphStep graph(c.step(), 1);
  graph.count_eager_step();
  const auto x = torch::zeros({2, 8}, torch::kLong);
  EXPECT_FALSE(graph.run(x, x, 1e-3, 2).has_value());
  EXPECT_EQ(graph.stop_reason(), "step 2 cannot be captured: a gradient sync across ranks");
  EXPECT_FALSE(graph.wants());
}

}  // namespace
}  // namespace cuda_graph_step_test
}  // namespace hwt
