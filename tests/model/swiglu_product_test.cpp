// swiglu_product: the values and gradients of silu(gate) * up to the bit (fp32 and bf16), one node
// keeping gate and up, frozen inputs given no gradient, and no node without a graph.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "hwtrain/model/swiglu_product.h"

namespace hwt {
namespace swiglu_product_test {

struct Result {
  torch::Tensor out, grad_gate, grad_up;
  std::string node;
};

Result run(bool fused, torch::Dtype dtype, bool gate_grad, bool up_grad) {
  torch::manual_seed(3);
  auto gate = (2.0 * torch::randn({4, 16, 96})).to(dtype).requires_grad_(gate_grad);
  auto up = torch::randn({4, 16, 96}).to(dtype).requires_grad_(up_grad);
  auto g = torch::randn({4, 16, 96}).to(dtype);
  Result r;
  r.out = fused ? swiglu_product(gate, up) : torch::silu(gate) * up;
  r.node = r.out.grad_fn() ? r.out.grad_fn()->name() : "";
  r.out.backward(g);
  r.grad_gate = gate.grad();
  r.grad_up = up.grad();
  return r;
}

bool same(const torch::Tensor& a, const torch::Tensor& b) {
  return a.defined() == b.defined() && (!a.defined() || a.equal(b));
}

TEST(SwigluProduct, ValuesAndGradientsAreTheUnfusedOnesToTheBit) {
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (auto [gate_grad, up_grad] : {std::pair{true, true}, {true, false}, {false, true}}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + " gate " + std::to_string(gate_grad) + " up " +
                   std::to_string(up_grad));
      const Result ref = run(false, dtype, gate_grad, up_grad);
      const Result fused = run(true, dtype, gate_grad, up_grad);
      EXPECT_TRUE(fused.out.equal(ref.out));
      EXPECT_TRUE(same(fused.grad_gate, ref.grad_gate));
      EXPECT_TRUE(same(fused.grad_up, ref.grad_up));
      EXPECT_EQ(fused.grad_gate.defined(), gate_grad);
      EXPECT_EQ(fused.grad_up.defined(), up_grad);
      EXPECT_NE(fused.node.find("SiluTimes"), std::string::npos) << fused.node;  // one node, not Mul <- Silu
    }
  }
}

TEST(SwigluProduct, NoNodeWithoutAGraph) {
  auto gate = torch::randn({3, 8}), up = torch::randn({3, 8});
  EXPECT_FALSE(swiglu_product(gate, up).grad_fn());
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(swiglu_product(gate.requires_grad_(true), up).grad_fn());
  EXPECT_TRUE(swiglu_product(gate, up).equal(torch::silu(gate) * up));
}

}  // namespace swiglu_product_test
}  // namespace hwt
