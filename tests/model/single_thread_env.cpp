// The model tests use tiny tensors: one intra-op thread is fastest for them, and spinning OpenMP
// workers on a busy 2-core machine made them 10x slower (measured: 28 s vs 6 s for the suite).
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

class SingleThreadEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { torch::set_num_threads(1); }
};

const auto* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new SingleThreadEnvironment);

}  // namespace
