// `train --resume` from an earlier checkpoint of the run's own directory, typed with a trailing slash
// as a shell completes it: a new history starts there. At the new run's first save the checkpoints
// saved after it (and a best_ copy of a later step) move into checkpoints/superseded_after_step_N/,
// so that `latest` is the new run's; the checkpoints hold the callbacks' state.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hwtrain/core/files.h"
#include "hwtrain/io/checkpoint_store.h"
#include "support/shell.h"
#include "support/small_corpus.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

namespace fs = std::filesystem;

const std::string kRun =
    "train --data corpus --set data.document_separator=% --set data.cache_dir=cache --set model.preset=tiny "
    "--set train.device=cpu --set train.eval_interval=2 --set train.eval_batches=1 --set train.micro_batch_size=2 "
    "--set checkpoint.monitor=val_loss --set log.tensorboard=false --set log.report=false --set train.sample_tokens=0 "
    "--set train.time_budget=0 --set optimization.intra_op_threads=1 --set optimization.mixed_precision_dtype=fp32 ";

TEST(BranchResume, LaterCheckpointsMoveAsideAtTheFirstSave) {
  testing::TempDir dir;
  dir.write("corpus/a.txt", testing::small_corpus());
  ASSERT_EQ(testing::hwtrain_in(dir.path(), kRun + "--set train.max_steps=6 --set checkpoint.interval=2 --out run1",
                                "run1.log"),
            0)
      << testing::read_text(dir / "run1.log");
  const fs::path ckpts = dir / "run1" / "checkpoints";
  ASSERT_TRUE(fs::exists(ckpts / "step_00000006"));
  ASSERT_EQ(testing::hwtrain_in(dir.path(),
                                kRun + "--resume run1/checkpoints/step_00000002/ --set train.max_steps=4 "
                                       "--set checkpoint.interval=1",
                                "run2.log"),
            0)
      << testing::read_text(dir / "run2.log");
  const std::string log = testing::read_text(dir / "run2.log");
  EXPECT_NE(log.find("belong to the history this run replaces"), std::string::npos) << log;
  const fs::path aside = ckpts / "superseded_after_step_00000002";
  EXPECT_TRUE(fs::exists(aside / "step_00000004"));
  EXPECT_TRUE(fs::exists(aside / "step_00000006"));
  EXPECT_NO_THROW(verify_checkpoint(aside / "step_00000006"));
  EXPECT_EQ(CheckpointStore(ckpts, 3).latest()->filename(), "step_00000004");
  if (fs::exists(ckpts / "best_val_loss")) {
    EXPECT_LE(read_checkpoint_manifest(ckpts / "best_val_loss").step, 4);
  }
  // The new step 4 was saved after its evaluation: its state has seen it (a new best at 4, or one
  // check without improvement since step 2's best), not the state before it (best at 2, no wait).
  const auto state = nlohmann::json::parse(read_file(ckpts / "step_00000004" / "trainer_state.json"));
  const auto& watch = state.at("callbacks").at("model_checkpoint");
  const double best_step = watch.at("val_loss.min.best_step"), wait = watch.at("val_loss.min.wait");
  EXPECT_TRUE(best_step == 4 || (best_step == 2 && wait == 1)) << watch.dump();
}

}  // namespace
}  // namespace hwt
