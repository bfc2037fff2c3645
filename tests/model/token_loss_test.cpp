// The chunked 16-bit loss (model/token_loss.h), on CPU tensors: its loss and bf16/fp16 gradient
// agree with the exact (fp64) cross-entropy to the rounding of their dtypes, as the cast-first
// reference does; the chunking does not change a bit; every target ignored gives NaN. What it keeps
// and allocates: tests/train/token_loss_memory_test.cpp (the model area does not link obs/).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <torch/torch.h>

#include "hwtrain/model/token_loss.h"

namespace hwt {
namespace token_loss_test {

struct LossAndGrad {
  torch::Tensor loss, grad;
};

LossAndGrad run(const torch::Tensor& logits, const torch::Tensor& targets, int64_t chunk_rows, bool reference = false) {
  auto x = logits.detach().clone().requires_grad_(true);
  LossAndGrad r;
  r.loss = reference ? token_cross_entropy_reference(x, targets) : chunked_cross_entropy(x, targets, chunk_rows);
  r.loss.backward();
  r.grad = x.grad();
  return r;
}

// The exact loss and gradient of the 16-bit logits, in fp64 (cross_entropy itself, not the
// reference, which casts to fp32).
LossAndGrad exact(const torch::Tensor& logits, const torch::Tensor& targets) {
  auto x = logits.to(torch::kDouble).detach().requires_grad_(true);
  LossAndGrad r;
  r.loss = torch::nn::functional::cross_entropy(x, targets, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1));
  r.loss.backward();
  r.grad = x.grad();
  EXPECT_EQ(r.grad.scalar_type(), torch::kDouble);
  return r;
}

struct Case {
  torch::Tensor logits, targets;
};

Case make_case(torch::Dtype dtype, int64_t n, int64_t v) {
  torch::manual_seed(3);
  Case c;
  c.logits = (4.0 * torch::randn({n, v})).to(dtype);
  c.targets = torch::randint(v, {n}, torch::kLong);
  c.targets.index_put_({torch::arange(0, n, 5)}, -1);  // ignored positions
  return c;
}

TEST(ChunkedCrossEntropy, AgreesWithTheExactLossToTheRoundingOfItsDtype) {
  for (auto dtype : {torch::kBFloat16, torch::kHalf}) {
    const Case c = make_case(dtype, 61, 1003);
    const LossAndGrad want = exact(c.logits, c.targets);
    const LossAndGrad ref = run(c.logits, c.targets, 0, /*reference=*/true);
    for (int64_t chunk : {int64_t{1}, int64_t{7}, int64_t{61}, int64_t{0}}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + ", chunks of " + std::to_string(chunk) + " rows");
      const LossAndGrad got = run(c.logits, c.targets, chunk);
      EXPECT_EQ(got.loss.scalar_type(), torch::kFloat);
      EXPECT_EQ(got.grad.scalar_type(), dtype);
      EXPECT_NEAR(got.loss.item<double>(), want.loss.item<double>(), 1e-6 * want.loss.item<double>());
      // Within one rounding of the dtype of the exact gradient (half an ulp, plus fp32's own error;
      // fp16's subnormals are spaced 2^-24), as the reference is.
      const bool half = dtype == torch::kHalf;
      const double eps = half ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8), tiny = half ? std::ldexp(1.0, -24) : 1e-30;
      const torch::Tensor w = want.grad, tolerance = w.abs() * eps + tiny;
      EXPECT_TRUE((got.grad.to(torch::kDouble) - w).abs().le(tolerance).all().item<bool>())
          << "largest error " << ((got.grad.to(torch::kDouble) - w).abs() / tolerance).max().item<double>()
          << " tolerances";
      EXPECT_TRUE((ref.grad.to(torch::kDouble) - w).abs().le(tolerance).all().item<bool>());
      EXPECT_TRUE(got.grad.index({torch::arange(0, 61, 5)}).eq(0).all().item<bool>());  // ignored rows
    }
  }
}

TEST(ChunkedCrossEntropy, ChunkingChangesNoBit) {
  const Case c = make_case(torch::kBFloat16, 45, 517);
  const LossAndGrad whole = run(c.logits, c.targets, 45);
  for (int64_t chunk : {1, 4, 44}) {
    const LossAndGrad got = run(c.logits, c.targets, chunk);
    EXPECT_TRUE(torch::equal(got.loss, whole.loss)) << chunk;
    EXPECT_TRUE(torch::equal(got.grad, whole.grad)) << chunk;
  }
}

// The loss is NaN, as the reference's, and the gradient zero, as the reference's (one such
// micro-batch must not put NaN into a step's accumulated gradients).
TEST(ChunkedCrossEntropy, IsNanWithAZeroGradientWhenEveryTargetIsIgnored) {
  auto logits = torch::randn({8, 50}).to(torch::kBFloat16);
  auto targets = torch::full({8}, -1, torch::kLong);
  const LossAndGrad got = run(logits, targets, 3), ref = run(logits, targets, 0, /*reference=*/true);
  EXPECT_TRUE(std::isnan(got.loss.item<double>()));
  EXPECT_TRUE(std::isnan(ref.loss.item<double>()));
  EXPECT_TRUE(got.grad.eq(0).all().item<bool>()) << got.grad.abs().max();
  EXPECT_TRUE(torch::equal(got.grad.to(torch::kFloat), ref.grad.to(torch::kFloat)));
}

TEST(ChunkedCrossEntropy, RefusesADoubleBackward) {
  auto x = torch::randn({4, 10}).to(torch::kBFloat16).requires_grad_(true);
  auto loss = chunked_cross_entropy(x, torch::randint(10, {4}, torch::kLong));
  EXPECT_THROW(torch::autograd::grad({loss}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true), c10::Error);
}

}  // namespace token_loss_test
}  // namespace hwt
