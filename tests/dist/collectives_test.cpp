// ProcessGroup's all-gather and in-place reduce-scatter over three Gloo ranks (an odd count: every
// rank is the root of one broadcast): the all-gather (one broadcast per rank on Gloo) equals the
// ranks' inputs in rank order; the in-place reduce-scatter equals c10d's own reduce-scatter bit for
// bit, in fp32 and bf16, and on Gloo its shard is a view of the input (no second whole buffer).
// WorkGroup waits for every part within one deadline before it rethrows a failure.
#include <gtest/gtest.h>

#include "dist/dist_test_util.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/dist/work_group.h"

namespace hwt {
namespace {

TEST(DistWorker, Collectives) {
  HWT_WORKER_ONLY();
  auto group = testing::worker_group();
  ProcessGroup& g = *group;
  const int rank = g.rank(), world = g.world_size();
  ASSERT_EQ(world, 3);

  // All-gather: rank r sends 5 values r * 10 + i; twice in flight at once, as ZeRO-3's prefetch does.
  torch::Tensor in = torch::arange(5, torch::kFloat) + 10.0 * rank;
  torch::Tensor in2 = in * -1;
  torch::Tensor out = torch::full({15}, -7.0f), out2 = torch::full({15}, -7.0f);
  auto w1 = g.all_gather_into(out, in);
  auto w2 = g.all_gather_into(out2, in2);
  g.wait(w2, "the second all-gather");
  g.wait(w1, "the first all-gather");
  const torch::Tensor want = torch::arange(5, torch::kFloat).repeat({3}) + torch::arange(3).repeat_interleave(5) * 10.0;
  EXPECT_TRUE(torch::equal(out, want)) << out;
  EXPECT_TRUE(torch::equal(out2, -want)) << out2;
  EXPECT_TRUE(torch::equal(in, torch::arange(5, torch::kFloat) + 10.0 * rank));  // the input is left as it was

  // Reduce-scatter in place against c10d's reduce-scatter of the same values.
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    torch::manual_seed(11 + rank);
    const torch::Tensor grads = torch::randn({12}).to(dtype);
    torch::Tensor whole = grads.clone(), native_in = grads.clone(), native = torch::empty({4}, grads.options());
    torch::Tensor shard;
    auto w = g.reduce_scatter_in_place(whole, shard);
    g.wait(g.reduce_scatter_sum(native, native_in), "c10d's reduce-scatter");
    g.wait(w, "the in-place reduce-scatter");
    ASSERT_EQ(shard.numel(), 4);
    EXPECT_TRUE(torch::equal(shard, native)) << shard << native;
    EXPECT_TRUE(shard.storage().is_alias_of(whole.storage()));  // Gloo: a slice of the all-reduced input
  }
  torch::Tensor odd = torch::ones({7}), shard;
  EXPECT_THROW(g.reduce_scatter_in_place(odd, shard), c10::Error);  // 7 does not split into 3
  g.shutdown();
}

// A part that fails or succeeds when waited for, noting the timeout it was given.
class FakeWork : public c10d::Work {
 public:
  explicit FakeWork(bool fails) : fails_(fails) {}
  bool wait(std::chrono::milliseconds timeout) override {
    given = timeout;
    waited = true;
    if (fails_) throw std::runtime_error("peer gone");
    return true;
  }
  bool waited = false;
  std::chrono::milliseconds given{0};

 private:
  bool fails_;
};

TEST(WorkGroup, WaitsForEveryPartWithinOneDeadlineThenRethrowsTheFirstFailure) {
  auto a = c10::make_intrusive<FakeWork>(true), b = c10::make_intrusive<FakeWork>(false);
  WorkGroup group({a, b});
  try {
    group.wait(std::chrono::milliseconds(5000));
    FAIL() << "the failure of the first part was not rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "peer gone");
  }
  EXPECT_TRUE(a->waited);
  EXPECT_TRUE(b->waited);  // not left running behind the failed one
  EXPECT_LE(a->given.count(), 5000);
  EXPECT_LE(b->given.count(), a->given.count());  // what is left of the one deadline
}

TEST(ProcessGroupCollectives, AllGatherAndInPlaceReduceScatterOverThreeRanks) {
  auto run = testing::run_workers("Collectives", 3);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

}  // namespace
}  // namespace hwt
