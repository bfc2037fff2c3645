// broadcast_tensors (dist/ddp.h) over dist/bucketed_broadcast.h, on two Gloo ranks: every rank ends
// with rank 0's values, for a large tensor (in place), small ones packed, a transposed one and a
// bf16 one, holding at most two buckets beside the tensors (it concatenated a whole copy per dtype
// before); a bucket larger than everything packs each dtype's into one broadcast and one buffer.
#include <gtest/gtest.h>

#include "dist/dist_test_util.h"
#include "hwtrain/dist/ddp.h"
#include "hwtrain/obs/host_allocation_counter.h"

namespace hwt {
namespace {

std::vector<torch::Tensor> broadcast_subjects() {
  std::vector<torch::Tensor> t;
  t.push_back(torch::zeros({1000}));  // 4,000 bytes: alone, in place
  for (int i = 0; i < 6; ++i) t.push_back(torch::zeros({50}));
  t.push_back(torch::zeros({10, 20}).t());
  t.push_back(torch::zeros({300}, torch::kBFloat16));
  return t;
}

TEST(DistWorker, BucketedBroadcast) {
  HWT_WORKER_ONLY();
  ASSERT_TRUE(install_host_allocation_counter());
  auto group = testing::worker_group();
  for (const int64_t bucket : {int64_t{1024}, int64_t{1} << 20}) {
    std::vector<torch::Tensor> tensors = broadcast_subjects();
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].fill_(group->rank() == 0 ? 1.0 + static_cast<double>(i) : -1.0);
    const int64_t start = host_allocation().current_bytes;
    reset_host_allocation_peak();
    broadcast_tensors(*group, tensors, 0, "test broadcast", bucket);
    // Small buckets: the packed ones at most 1 KiB each, two at once; one large bucket: every fp32
    // tensor (6,000 bytes) in one broadcast, so one packing buffer (the bf16 one goes alone).
    const int64_t bound = bucket == 1024 ? 2 * bucket : 6000;
    EXPECT_LE(host_allocation().peak_bytes - start, bound) << "bucket " << bucket;
    for (size_t i = 0; i < tensors.size(); ++i) {
      EXPECT_TRUE(torch::equal(tensors[i], torch::full_like(tensors[i], 1.0 + static_cast<double>(i))))
          << "tensor " << i << ", bucket " << bucket;
    }
  }
  group->shutdown();
}

TEST(BucketedBroadcast, EveryRankEndsWithRankZerosValuesHoldingTwoBucketsAtMost) {
  auto run = testing::run_workers("BucketedBroadcast", 2);
  EXPECT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
}

}  // namespace
}  // namespace hwt
