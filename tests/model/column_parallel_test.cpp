// The column-parallel layers' autograd function (model/column_parallel.h) checked against whole
// layers in one process: threads play the ranks, and each rank's outputs and gradients must be its
// cut of the whole layers' (fp32 within 1e-5, and under CPU bf16 autocast within bf16's rounding),
// with and without sequence parallelism. Also: without a group the layers are hwt::linear bit for
// bit, and backward starts its collective before the weight gradients' GEMMs and waits after
// them (the operators seen by a RecordFunction observer, in order), and skips what a frozen input
// or frozen weights do not need.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/record_function.h>

#include <string>
#include <tuple>
#include <vector>

#include "hwtrain/model/column_parallel.h"
#include "support/thread_comm.h"

namespace hwt {
namespace column_parallel_test {

using testing::ThreadComm;
using testing::ThreadGroup;

constexpr int64_t B = 2, T = 4, C = 8;
const std::vector<int64_t> kWidths{6, 4};  // two layers reading one input, as q and k/v

struct Whole {
  torch::Tensor x, grad_x;
  std::vector<torch::Tensor> weights, biases, outputs, grad_weights, grad_biases, upstream;
};

// The whole layers, and every output's gradient from the loss sum(y_i * upstream_i).
Whole whole_layers(bool autocast) {
  torch::manual_seed(11);
  Whole w;
  w.x = torch::randn({B, T, C}).requires_grad_();
  for (int64_t width : kWidths) {
    w.weights.push_back(torch::randn({width, C}).requires_grad_());
    w.biases.push_back(torch::randn({width}).requires_grad_());
    w.upstream.push_back(torch::randn({B, T, width}));
  }
  at::autocast::set_autocast_enabled(at::kCPU, autocast);
  torch::Tensor loss = torch::zeros({});
  for (size_t i = 0; i < kWidths.size(); ++i) {
    w.outputs.push_back(linear(w.x, w.weights[i], w.biases[i]));
    loss = loss + (w.outputs.back().to(torch::kFloat) * w.upstream[i]).sum();
  }
  at::autocast::set_autocast_enabled(at::kCPU, false);
  loss.backward();
  w.grad_x = w.x.grad();
  for (size_t i = 0; i < kWidths.size(); ++i) {
    w.grad_weights.push_back(w.weights[i].grad());
    w.grad_biases.push_back(w.biases[i].grad());
  }
  return w;
}

torch::Tensor rows(const torch::Tensor& t, int64_t dim, int rank, int size) {
  return t.chunk(size, dim)[static_cast<size_t>(rank)];
}

void expect_near(const torch::Tensor& got, const torch::Tensor& want, double tolerance, const std::string& what) {
  EXPECT_TRUE(torch::allclose(got.to(torch::kFloat), want.to(torch::kFloat), tolerance, tolerance))
      << what << ": max |difference| " << (got.to(torch::kFloat) - want.to(torch::kFloat)).abs().max().item<double>();
}

// (ranks, sequence parallel, autocast bf16)
struct ColumnParallelRanks : ::testing::TestWithParam<std::tuple<int, bool, bool>> {};

TEST_P(ColumnParallelRanks, OutputsAndGradientsAreTheWholeLayersCut) {
  const auto [size, sequence_parallel, autocast] = GetParam();
  const Whole whole = whole_layers(autocast);
  // bf16 rounds each product's inputs and output: a few units of its 2^-8 relative step.
  const double tolerance = autocast ? 0.1 : 1e-5;
  ThreadGroup group(size);
  const auto errors = testing::run_ranks(group, [&](int r) {
    ThreadComm comm(group, r);
    comm.sequence_parallel = sequence_parallel;
    torch::Tensor x = (sequence_parallel ? rows(whole.x, 1, r, size) : whole.x).detach().clone().requires_grad_();
    std::vector<ColumnLinear> layers;
    for (size_t i = 0; i < kWidths.size(); ++i) {
      layers.push_back({rows(whole.weights[i], 0, r, size).detach().clone().requires_grad_(),
                        rows(whole.biases[i], 0, r, size).detach().clone().requires_grad_()});
    }
    at::autocast::set_autocast_enabled(at::kCPU, autocast);
    const std::vector<torch::Tensor> outputs = column_parallel(x, layers, &comm);
    at::autocast::set_autocast_enabled(at::kCPU, false);
    torch::Tensor loss = torch::zeros({});
    for (size_t i = 0; i < kWidths.size(); ++i) {
      EXPECT_EQ(outputs[i].scalar_type(), whole.outputs[i].scalar_type());
      expect_near(outputs[i], rows(whole.outputs[i], 2, r, size), tolerance, "output " + std::to_string(i));
      loss = loss + (outputs[i].to(torch::kFloat) * rows(whole.upstream[i], 2, r, size)).sum();
    }
    loss.backward();
    // Each rank's input gradient is the whole one (its slice under sequence parallelism).
    expect_near(x.grad(), sequence_parallel ? rows(whole.grad_x, 1, r, size) : whole.grad_x, tolerance, "input grad");
    for (size_t i = 0; i < kWidths.size(); ++i) {
      expect_near(layers[i].weight.grad(), rows(whole.grad_weights[i], 0, r, size), tolerance, "weight grad");
      expect_near(layers[i].bias.grad(), rows(whole.grad_biases[i], 0, r, size), tolerance, "bias grad");
    }
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

INSTANTIATE_TEST_SUITE_P(Layouts, ColumnParallelRanks,
                         ::testing::Combine(::testing::Values(2), ::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<1>(info.param) ? "sequence_parallel" : "whole_input") +
                                  (std::get<2>(info.param) ? "_bf16" : "_fp32");
                         });

TEST(ColumnParallel, WithoutAGroupTheLayersAreLinearBitForBit) {
  torch::manual_seed(5);
  torch::nn::Linear a(torch::nn::LinearOptions(C, 6)), b(torch::nn::LinearOptions(C, 4).bias(false));
  const torch::Tensor x = torch::randn({B, T, C});
  const auto outputs = column_parallel(x, {column_of(a), column_of(b)}, nullptr);
  EXPECT_TRUE(torch::equal(outputs[0], a->forward(x)));
  EXPECT_TRUE(torch::equal(outputs[1], b->forward(x)));
}

// What one rank did, in order: the collectives it started and waited for, and the GEMMs it ran.
std::vector<std::string>& events() {
  static std::vector<std::string> log;
  return log;
}

class RecordingComm : public ThreadComm {
 public:
  using ThreadComm::ThreadComm;
  std::function<void()> all_reduce_sum_async(torch::Tensor& t) override {
    events().push_back("start all-reduce");
    all_reduce_sum(t);
    return [] { events().push_back("wait all-reduce"); };
  }
  std::function<torch::Tensor()> all_gather_async(const torch::Tensor& t) override {
    events().push_back("start all-gather");
    torch::Tensor all = all_gather(t);
    return [all] {
      events().push_back("wait all-gather");
      return all;
    };
  }
  std::function<torch::Tensor()> reduce_scatter_async(const torch::Tensor& t) override {
    events().push_back("start reduce-scatter");
    torch::Tensor mine = reduce_scatter(t);
    return [mine] {
      events().push_back("wait reduce-scatter");
      return mine;
    };
  }
};

std::unique_ptr<at::ObserverContext> on_operator(const at::RecordFunction& fn) {
  if (std::string(fn.name()) == "aten::mm") events().push_back("mm");
  return nullptr;
}

// Backward's events on one rank; `x_grad` / `w_grad`: whether the input / the weights are trained
// (a frozen one must get no gradient).
std::vector<std::string> backward_events(bool sequence_parallel, bool x_grad = true, bool w_grad = true) {
  ThreadGroup group(1);
  RecordingComm comm(group, 0);
  comm.sequence_parallel = sequence_parallel;
  torch::manual_seed(2);
  const torch::Tensor x = torch::randn({B, T, C}, torch::requires_grad(x_grad));
  const std::vector<ColumnLinear> layers{{torch::randn({6, C}, torch::requires_grad(w_grad)), torch::randn({6})},
                                         {torch::randn({4, C}, torch::requires_grad(w_grad)), torch::randn({4})}};
  layers[1].bias.requires_grad_();  // one bias trained, one frozen
  const auto outputs = column_parallel(x, layers, &comm);
  const torch::Tensor loss = outputs[0].sum() + outputs[1].sum();
  events().clear();
  const at::CallbackHandle handle = at::addThreadLocalCallback(at::RecordFunctionCallback(on_operator));
  loss.backward();
  at::removeCallback(handle);
  EXPECT_EQ(x.grad().defined(), x_grad);
  EXPECT_EQ(layers[0].weight.grad().defined(), w_grad);
  EXPECT_FALSE(layers[0].bias.grad().defined());
  EXPECT_TRUE(torch::allclose(layers[1].bias.grad(), torch::full({4}, static_cast<double>(B * T))));
  return events();
}

TEST(ColumnParallel, BackwardStartsItsCollectiveBeforeTheWeightGradientsAndWaitsAfter) {
  // Two layers: two GEMMs for the input's gradient, then two for the weights' between start and wait.
  EXPECT_EQ(backward_events(false),
            (std::vector<std::string>{"mm", "mm", "start all-reduce", "mm", "mm", "wait all-reduce"}));
  // Sequence parallelism: the kept slice gathered again while the input's gradient is computed,
  // whose reduce-scatter runs while the weights' gradients are.
  EXPECT_EQ(backward_events(true), (std::vector<std::string>{"start all-gather", "mm", "mm", "start reduce-scatter",
                                                             "wait all-gather", "mm", "mm", "wait reduce-scatter"}));
}

TEST(ColumnParallel, AFrozenInputOrFrozenWeightsSkipTheirGEMMsAndCollectives) {
  // The input frozen: the weights' GEMMs only, no input gradient to sum (its slice still gathered).
  EXPECT_EQ(backward_events(false, /*x_grad=*/false), (std::vector<std::string>{"mm", "mm"}));
  EXPECT_EQ(backward_events(true, /*x_grad=*/false),
            (std::vector<std::string>{"start all-gather", "wait all-gather", "mm", "mm"}));
  // The weights frozen: the input's gradient only, and no gather of the kept slice.
  EXPECT_EQ(backward_events(false, true, /*w_grad=*/false),
            (std::vector<std::string>{"mm", "mm", "start all-reduce", "wait all-reduce"}));
  EXPECT_EQ(backward_events(true, true, /*w_grad=*/false),
            (std::vector<std::string>{"mm", "mm", "start reduce-scatter", "wait reduce-scatter"}));
}

}  // namespace column_parallel_test
}  // namespace hwt
