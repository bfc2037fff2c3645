// Resuming a sharded (ZeRO-2) checkpoint through the Trainer, in one process (a Gloo group of one
// rank): under a ZeRO-2 plan resume_from keeps the checkpoint's shard files for shard_training,
// which reads this rank's segments (one shard file), and the continuation equals an unsharded
// resume of the same checkpoint; a ZeRO-2 plan that is never given shards reads the whole weights
// and state when fit() starts and continues bit for bit like the unsharded resume.
#include <gtest/gtest.h>

#include "dist/dist_test_util.h"
#include "hwtrain/train/sharded_checkpoint_reader.h"
#include "hwtrain/train/sharded_training.h"
#include "trainer_fixture.h"

namespace hwt {
namespace sharded_resume_test {

// ZeRO-2 over a group of one rank, given what resume_from kept for the shards; returns the shard
// files it read (empty for a fresh run).
std::vector<std::string> attach_zero2(Trainer& t, const std::shared_ptr<ProcessGroup>& group) {
  ResumedState resumed = t.take_resumed_state();
  const std::shared_ptr<ShardedCheckpointReader> reader = resumed.shards;
  ShardedTraining st = shard_training(t.model(), t.optimizer(), group, ShardStage::Zero2, Precision::Fp32, resumed);
  t.set_gradient_sync(st.engine);
  t.set_optimizer_sharding(std::move(st.sharding));
  return reader ? reader->files_read() : std::vector<std::string>{};
}

TEST(ShardedResume, OwnSegmentsOrWholeAtFitContinueLikeAnUnshardedResume) {
  auto group = testing::one_rank_group();
  TrainerFixture f;
  f.plan.sharding = Sharding::Zero2;
  f.config.train.max_steps = 3;
  auto first = f.make("first");
  EXPECT_TRUE(attach_zero2(*first, group).empty());
  int sealed = 0;
  first->set_save_agreement([&] { ++sealed; });
  first->fit();
  const std::filesystem::path ckpt = first->save_checkpoint();
  ASSERT_TRUE(std::filesystem::exists(ckpt / kShardingManifest)) << ckpt;
  EXPECT_EQ(sealed, 1);  // after the shards' checkpoint too

  f.config.train.max_steps = 5;
  auto sharded = f.make("sharded");
  sharded->resume_from(ckpt);
  EXPECT_FALSE(sharded->optimizer().has_state());
  EXPECT_EQ(attach_zero2(*sharded, group), std::vector<std::string>{shard_file_name(0, 1)});
  sharded->fit();

  auto untaken = f.make("untaken");  // a ZeRO-2 plan with no shards attached: fit() reads them whole
  untaken->resume_from(ckpt);
  untaken->fit();

  f.plan.sharding = Sharding::None;
  auto plain = f.make("plain");
  plain->resume_from(ckpt);
  plain->fit();

  ASSERT_EQ(plain->loss_history().size(), 2u);
  ASSERT_EQ(untaken->loss_history().size(), 2u);
  ASSERT_EQ(sharded->loss_history().size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(untaken->loss_history()[i], plain->loss_history()[i]) << "step " << 4 + i;  // bit for bit
    EXPECT_NEAR(sharded->loss_history()[i], plain->loss_history()[i], 1e-6) << "step " << 4 + i;
  }
}

}  // namespace sharded_resume_test
}  // namespace hwt
