// What the chunked 16-bit loss (model/token_loss.h) keeps for backward and allocates in backward:
// the 16-bit logits' size, not an fp32 copy of them as the cast-first reference (counted by
// obs/host_allocation_counter.h; here because the model area's tests do not link obs/).
#include <gtest/gtest.h>

#include <iostream>
#include <torch/torch.h>

#include "hwtrain/model/token_loss.h"
#include "hwtrain/obs/host_allocation_counter.h"

namespace hwt {
namespace token_loss_memory_test {

// Bytes the graph keeps after forward, and the most allocated during backward, above what existed
// before the loss (the logits and targets).
struct Footprint {
  int64_t kept = 0, backward_peak = 0;
};

Footprint footprint(const torch::Tensor& logits16, const torch::Tensor& targets, int64_t chunk_rows, bool reference) {
  auto x = logits16.detach().clone().requires_grad_(true);
  const int64_t before = host_allocation().current_bytes;
  torch::Tensor loss = reference ? token_cross_entropy_reference(x, targets) : chunked_cross_entropy(x, targets, chunk_rows);
  Footprint f;
  f.kept = host_allocation().current_bytes - before;
  reset_host_allocation_peak();
  loss.backward();
  f.backward_peak = host_allocation().peak_bytes - before;
  return f;
}

TEST(ChunkedCrossEntropy, KeepsAndWritesTheSixteenBitLogitsSizeNotAnFp32Copy) {
  if (!install_host_allocation_counter()) GTEST_SKIP() << "c10 kept another CPU allocator";
  const int64_t n = 256, v = 4096, chunk = 16;
  torch::manual_seed(3);
  const torch::Tensor logits = (4.0 * torch::randn({n, v})).to(torch::kBFloat16);
  const torch::Tensor targets = torch::randint(v, {n}, torch::kLong);
  const double fp32_copy = static_cast<double>(n * v * 4), chunk_scratch = static_cast<double>(chunk * v * 4);
  const Footprint ref = footprint(logits, targets, chunk, /*reference=*/true);
  const Footprint got = footprint(logits, targets, chunk, /*reference=*/false);
  std::cout << "kept after forward: reference " << ref.kept / fp32_copy << ", chunked " << got.kept / fp32_copy
            << " fp32 copies; backward's peak: reference " << ref.backward_peak / fp32_copy << ", chunked "
            << got.backward_peak / fp32_copy << "\n";
  EXPECT_GE(static_cast<double>(ref.kept), fp32_copy);  // the saved fp32 log-softmax
  // The saved logits are the caller's own tensor: only the per-row fp32 values are new.
  EXPECT_LT(static_cast<double>(got.kept), 0.05 * fp32_copy);
  // The bf16 gradient (half an fp32 copy) and one chunk's scratch, against the reference's fp32 gradient and more.
  EXPECT_LT(static_cast<double>(got.backward_peak), 0.5 * fp32_copy + 2.0 * chunk_scratch + 0.05 * fp32_copy);
  EXPECT_GT(static_cast<double>(ref.backward_peak), fp32_copy);
}

}  // namespace token_loss_memory_test
}  // namespace hwt
