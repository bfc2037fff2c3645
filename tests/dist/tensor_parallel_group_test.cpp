// ProcessGroupComm on two Gloo ranks: the started collectives give what the blocking ones give
// and are counted as started, and the column-parallel layers (model/column_parallel.h), whose
// backward waits for its collective after the weight gradients, match whole layers with and
// without sequence parallelism.
#include <gtest/gtest.h>

#include "dist/dist_test_util.h"
#include "hwtrain/dist/tensor_parallel_group.h"
#include "hwtrain/model/column_parallel.h"

namespace hwt {
namespace tensor_parallel_group_test {

void expect_started_collectives_complete(ProcessGroupComm& comm) {
  const int rank = comm.rank();
  torch::Tensor summed = torch::full({3, 2}, rank + 1.0);
  auto reduced = comm.all_reduce_sum_async(summed);
  auto gathered = comm.all_gather_async(torch::full({2}, static_cast<double>(rank)));
  auto scattered = comm.reduce_scatter_async(torch::arange(4.0).view({4, 1}) * (rank + 1));
  EXPECT_TRUE(torch::equal(scattered(), torch::tensor({{0.0}, {3.0}}) + 6.0 * rank));  // 3 x rows of arange
  reduced();
  EXPECT_TRUE(torch::equal(summed, torch::full({3, 2}, 3.0)));
  EXPECT_TRUE(torch::equal(gathered(), torch::tensor({{0.0, 0.0}, {1.0, 1.0}})));
  EXPECT_EQ(comm.stats().collectives, 3);
  EXPECT_EQ(comm.stats().started, 3);
  torch::Tensor blocking = torch::ones({2});
  comm.all_reduce_sum(blocking);
  EXPECT_EQ(comm.stats().collectives, 4);
  EXPECT_EQ(comm.stats().started, 3);
}

void expect_column_layers_match_whole(ProcessGroupComm& comm, bool sequence_parallel) {
  const int rank = comm.rank(), size = comm.size();
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({2, 4, 8}, torch::requires_grad());
  const torch::Tensor w = torch::randn({6, 8}, torch::requires_grad()), b = torch::randn({6}, torch::requires_grad());
  const torch::Tensor upstream = torch::randn({2, 4, 6});
  (linear(x, w, b) * upstream).sum().backward();

  comm.sequence_parallel = sequence_parallel;
  const torch::Tensor x_mine =
      (sequence_parallel ? x.chunk(size, 1)[rank] : x).detach().clone().requires_grad_();
  const ColumnLinear mine{w.chunk(size, 0)[rank].detach().clone().requires_grad_(),
                          b.chunk(size, 0)[rank].detach().clone().requires_grad_()};
  const torch::Tensor y = column_parallel(x_mine, {mine}, &comm)[0];
  (y * upstream.chunk(size, 2)[rank]).sum().backward();
  EXPECT_TRUE(torch::allclose(x_mine.grad(), sequence_parallel ? x.grad().chunk(size, 1)[rank] : x.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(mine.weight.grad(), w.grad().chunk(size, 0)[rank], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(mine.bias.grad(), b.grad().chunk(size, 0)[rank], 1e-5, 1e-5));
}

TEST(DistWorker, TensorParallelComm) {
  HWT_WORKER_ONLY();
  ProcessGroupComm comm(testing::worker_group());
  expect_started_collectives_complete(comm);
  expect_column_layers_match_whole(comm, false);
  expect_column_layers_match_whole(comm, true);
}

TEST(ProcessGroupComm, StartedCollectivesAndColumnLayersWorkOnTwoRanks) {
  auto run = testing::run_workers("TensorParallelComm", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

}  // namespace tensor_parallel_group_test
}  // namespace hwt
