// Callbacks across a resume (train/callback.h's CallbackState): the best checkpoint's metric, early
// stopping's patience and LR-on-plateau's cooldown continue where the checkpoint left them; a due
// save waits for its step's evaluation so that the checkpoint holds it; the state in
// trainer_state.json is read with bounds; and a resume from an earlier checkpoint of the same
// directory sets the later ones aside (io/checkpoint_branch.h).
#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/io/checkpoint_branch.h"
#include "hwtrain/train/early_stopping.h"
#include "hwtrain/train/lr_plateau.h"
#include "hwtrain/train/model_checkpoint.h"
#include "hwtrain/train/trainer_state_file.h"
#include "support/temp_dir.h"
#include "train/fake_control.h"

namespace hwt {
namespace {

using testing::eval_record;
using testing::FakeTrainerControl;
using testing::step_record;

ModelCheckpointOptions best_of_val_loss() {
  ModelCheckpointOptions o;
  o.every_steps = 1;
  o.monitor = "val_loss";
  o.save_final = false;
  return o;
}

void evaluate_at(Callback& cb, FakeTrainerControl& t, int64_t step, double val_loss) {
  t.current_step = step;
  t.weight.fill_(static_cast<double>(step));
  cb.on_step_end(t, step_record(step, 1.0));
  cb.on_evaluation_end(t, eval_record(step, val_loss));
}

// Best 1.5 at step 2; a resumed run's 1.8 at step 3 does not replace it, its 1.4 does. Without the
// state, 1.8 would have (the bug: a worse checkpoint kept as the best).
TEST(CallbackResume, TheBestCheckpointKeepsItsValueAcrossAResume) {
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  ModelCheckpoint first(best_of_val_loss());
  first.on_train_begin(t);
  evaluate_at(first, t, 1, 2.0);
  evaluate_at(first, t, 2, 1.5);
  const CallbackState saved = first.state();
  EXPECT_EQ(saved.at("val_loss.min.best"), 1.5);
  EXPECT_EQ(saved.at("val_loss.min.best_step"), 2);

  ModelCheckpoint resumed(best_of_val_loss());
  resumed.on_train_begin(t);
  resumed.load_state(saved);
  evaluate_at(resumed, t, 3, 1.8);
  const auto best = dir / "checkpoints" / "best_val_loss";
  EXPECT_EQ(read_checkpoint_manifest(best).step, 2);
  evaluate_at(resumed, t, 4, 1.4);
  EXPECT_EQ(read_checkpoint_manifest(best).step, 4);

  ModelCheckpointOptions loss = best_of_val_loss();  // the state of another metric is not taken
  loss.monitor = "loss";
  ModelCheckpoint other(loss);
  other.load_state(saved);
  EXPECT_FALSE(other.best());
}

// A resume from step 3 after the best moved on to step 4: the branch sets step 4 and its best copy
// aside, and the resumed best (1.5 at step 2) gets its copy back from step 2's checkpoint at the
// first save, rather than none until the metric beats 1.5.
TEST(CallbackResume, AfterABranchTheResumedBestHasItsCopyAgain) {
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  ModelCheckpoint first(best_of_val_loss());
  first.on_train_begin(t);
  evaluate_at(first, t, 1, 2.0);
  evaluate_at(first, t, 2, 1.5);
  evaluate_at(first, t, 3, 1.8);
  const CallbackState at_step_3 = first.state();
  evaluate_at(first, t, 4, 1.2);
  const fs::path best = dir / "checkpoints" / "best_val_loss";
  ASSERT_EQ(read_checkpoint_manifest(best).step, 4);
  ASSERT_TRUE(set_aside_checkpoints_after(dir / "checkpoints", 3));  // as the Trainer does at its first save
  ASSERT_FALSE(fs::exists(best));

  ModelCheckpoint resumed(best_of_val_loss());
  resumed.on_train_begin(t);
  resumed.load_state(at_step_3);
  evaluate_at(resumed, t, 4, 1.9);  // no improvement
  ASSERT_TRUE(fs::exists(best));
  EXPECT_EQ(read_checkpoint_manifest(best).step, 2);
}

// Where the loop evaluates after a step, the step's due save waits for that evaluation: the
// checkpoint's state then holds the evaluation's best.
TEST(CallbackResume, ADueSaveWaitsForItsStepsEvaluation) {
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  t.evaluates = true;
  ModelCheckpoint cb(best_of_val_loss());
  cb.on_train_begin(t);
  t.current_step = 1;
  cb.on_step_end(t, step_record(1, 1.0));
  EXPECT_EQ(t.num_saves, 0);
  cb.on_evaluation_end(t, eval_record(1, 2.0));  // improves: saved once, kept as the best
  EXPECT_EQ(t.num_saves, 1);
  t.current_step = 2;
  cb.on_step_end(t, step_record(2, 1.0));
  cb.on_evaluation_end(t, eval_record(2, 3.0));  // no improvement: the due save still happens
  EXPECT_EQ(t.num_saves, 2);
  EXPECT_EQ(read_checkpoint_manifest(dir / "checkpoints" / "best_val_loss").step, 1);
}

// Patience 2: one check without improvement before the checkpoint, one after: it stops.
TEST(CallbackResume, EarlyStoppingsPatienceContinues) {
  FakeTrainerControl t;
  EarlyStoppingConfig c;
  c.enabled = true;
  c.patience = 2;
  EarlyStopping first(c);
  first.on_train_begin(t);
  first.on_evaluation_end(t, eval_record(1, 1.0));
  first.on_evaluation_end(t, eval_record(2, 1.1));
  EarlyStopping resumed(c);
  resumed.on_train_begin(t);
  resumed.load_state(first.state());
  resumed.on_evaluation_end(t, eval_record(3, 1.05));
  EXPECT_TRUE(t.stop_requested());
  EXPECT_NE(t.stop_reason.find("best 1 at step 1"), std::string::npos) << t.stop_reason;
}

// A reduction at check 3 starts a cooldown of 2; resumed after check 4, check 5 is still cooldown.
TEST(CallbackResume, LrPlateausCooldownContinues) {
  LrPlateauConfig c;
  c.enabled = true;
  c.patience = 2;
  c.factor = 0.5;
  c.cooldown = 2;
  FakeTrainerControl t;
  ReduceLROnPlateau first(c);
  first.on_train_begin(t);
  for (int s = 1; s <= 4; ++s) first.on_evaluation_end(t, eval_record(s, 1.0 + 0.1 * s));
  EXPECT_EQ(t.scale, 0.5);
  ReduceLROnPlateau resumed(c);
  resumed.on_train_begin(t);
  resumed.load_state(first.state());
  for (int s = 5; s <= 7; ++s) resumed.on_evaluation_end(t, eval_record(s, 1.0 + 0.1 * s));
  EXPECT_EQ(t.scale, 0.25);  // check 5 in cooldown, 6 and 7 count, reduced at 7 (as one run would)
}

TEST(CallbackResume, TheStateFileIsReadWithBounds) {
  nlohmann::json j = {{"step", 4}, {"tokens_seen", 10}, {"elapsed_seconds", 1.0}, {"sampler_position", 0},
                      {"lr_scale", 1.0}, {"micro_batch_size", 1}, {"grad_accum_steps", 1},
                      {"dataset", {{"tokenizer", "byte"}, {"vocab_size", 256}, {"fingerprint", 1u}}}};
  j["callbacks"] = {{"model_checkpoint", {{"val_loss.min.best", 1.5}}}};
  EXPECT_EQ(parse_trainer_state(j, "ts.json").callbacks.at("model_checkpoint").at("val_loss.min.best"), 1.5);
  j["callbacks"] = {{"model_checkpoint", {{"val_loss.min.best", "x"}}}};
  try {
    parse_trainer_state(j, "ts.json");
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("\"callbacks.model_checkpoint.val_loss.min.best\""), std::string::npos)
        << e.what();
  }
  j["callbacks"] = nlohmann::json::array();
  EXPECT_THROW(parse_trainer_state(j, "ts.json"), IoError);
}

// Steps 2, 4, 6 and a best copy of step 6: resuming from step 2 sets aside 4, 6 and that copy;
// a best copy of step 2 stays; a second branch from step 2 gets a folder of its own.
TEST(CallbackResume, AResumeFromAnEarlierCheckpointSetsTheLaterOnesAside) {
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  for (int s : {2, 4, 6}) {
    t.current_step = s;
    const auto saved = t.save_checkpoint();
    if (s == 2) link_checkpoint_as(saved, "best_loss");
    if (s == 6) link_checkpoint_as(saved, "best_val_loss");
  }
  const auto ckpts = dir / "checkpoints";
  const auto aside = set_aside_checkpoints_after(ckpts, 2);
  ASSERT_TRUE(aside);
  EXPECT_EQ(aside->folder, ckpts / "superseded_after_step_00000002");
  EXPECT_EQ(aside->moved, (std::vector<fs::path>{"best_val_loss", "step_00000004", "step_00000006"}));
  ASSERT_EQ(CheckpointStore(ckpts, 3).list().size(), 1u);
  EXPECT_EQ(CheckpointStore(ckpts, 3).latest()->filename(), "step_00000002");
  EXPECT_TRUE(fs::is_directory(ckpts / "best_loss"));
  EXPECT_NO_THROW(verify_checkpoint(aside->folder / "step_00000006"));
  EXPECT_FALSE(set_aside_checkpoints_after(ckpts, 2));  // nothing later: nothing made
  t.current_step = 3;
  t.save_checkpoint();
  EXPECT_EQ(set_aside_checkpoints_after(ckpts, 2)->folder, ckpts / "superseded_after_step_00000002_2");
}

}  // namespace
}  // namespace hwt
