// The trainer end to end on a tiny model: determinism, bitwise-identical resume, OOM recovery,
// the optimizer in backward.
#include "hwtrain/train/trainer.h"
#include "trainer_test_seam.h"

#include <gtest/gtest.h>

#include "hwtrain/core/files.h"
#include "hwtrain/data/byte_tokenizer.h"
#include "hwtrain/data/sharded_dataset.h"
#include "hwtrain/data/tokenizer_files.h"

#include "hwtrain/train/model_checkpoint.h"
#include "support/temp_dir.h"
#include "trainer_fixture.h"

namespace hwt {
namespace {

using Fixture = TrainerFixture;

TEST(Trainer, SameSeedSameLosses) {
  torch::set_num_threads(1);
  Fixture f;
  auto a = f.make("a");
  a->fit();
  auto b = f.make("b");
  b->fit();
  ASSERT_EQ(a->loss_history().size(), 6u);
  EXPECT_EQ(a->loss_history(), b->loss_history());
  EXPECT_LT(a->loss_history().back(), a->loss_history().front());
}

void expect_resume_gives_bitwise_identical_losses(bool optimizer_in_backward) {
  torch::set_num_threads(1);
  Fixture f;
  if (optimizer_in_backward) {
    f.plan.optimizer_step = OptimizerStep::InBackward;
    f.plan.micro_batch_size = 8;
    f.plan.grad_accum_steps = 1;
    f.config.train.grad_clip = 0;
  }
  auto full = f.make("full");
  full->fit();

  f.config.train.max_steps = 3;
  auto first = f.make("part");
  int sealed = 0;  // the ranks' agreement after every save (one process: only counted)
  first->set_save_agreement([&] { ++sealed; });
  first->fit();
  auto ckpt = first->save_checkpoint();
  ASSERT_TRUE(std::filesystem::exists(ckpt / "model.safetensors"));
  EXPECT_EQ(sealed, 1);

  f.config.train.max_steps = 6;
  auto second = f.make("part");
  second->resume_from(ckpt);
  EXPECT_EQ(second->step(), 3);
  EXPECT_EQ(second->optimizer_in_backward(), optimizer_in_backward);
  second->fit();
  ASSERT_EQ(second->loss_history().size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(second->loss_history()[i], full->loss_history()[3 + i]) << "step " << 4 + i;
}

TEST(Trainer, ResumeGivesBitwiseIdenticalLosses) { expect_resume_gives_bitwise_identical_losses(false); }

TEST(Trainer, ResumeGivesBitwiseIdenticalLossesWithTheOptimizerInBackward) {
  expect_resume_gives_bitwise_identical_losses(true);
}

TEST(Trainer, CheckpointCarriesTokenizerAndLoaderPosition) {
  Fixture f;
  // A token file of the real byte tokenizer (the fixture's 64-token vocabulary matches none).
  std::vector<int32_t> train(4000, 'a'), val(400, 'b');
  write_token_file(f.dir / "bytes.hwt", ByteTokenizer::kVocabSize, "byte", 1, train, val);
  f.data = std::make_shared<const ShardedDataset>(f.dir / "bytes.hwt");
  f.config.model.vocab_size = ByteTokenizer::kVocabSize;
  f.config.train.max_steps = 2;
  auto t = f.make("tok");
  t->fit();
  auto ckpt = t->save_checkpoint();
  ASSERT_TRUE(has_tokenizer_files(ckpt));
  EXPECT_EQ(load_tokenizer(ckpt)->name(), "byte");
  auto state = nlohmann::json::parse(read_file(ckpt / "trainer_state.json"));
  // 2 steps of micro_batch * accumulation windows each, counted across all ranks
  EXPECT_EQ(LoaderState::from_json(state.at("loader")).position, 2 * f.plan.micro_batch_size * f.plan.grad_accum_steps);
  EXPECT_EQ(t->loader_state(), LoaderState::from_json(state.at("loader")));
}

TEST(Trainer, OomHalvesMicroBatchAndRedoesTheStep) {
  torch::set_num_threads(1);
  Fixture f;
  f.plan.micro_batch_size = 2;
  f.plan.grad_accum_steps = 4;
  auto reference = f.make("ref");
  reference->fit();

  f.plan.micro_batch_size = 4;
  f.plan.grad_accum_steps = 2;
  auto recovering = f.make("oom");
  TrainerTestSeam::inject_oom_at_step(*recovering, 0);
  TrainResult r = recovering->fit();
  EXPECT_EQ(r.oom_recoveries, 1);
  EXPECT_EQ(recovering->micro_batch_size(), 2);
  EXPECT_EQ(recovering->grad_accum_steps(), 4);
  EXPECT_EQ(r.tokens_seen, 6 * 8 * 16);  // the global batch did not change
  EXPECT_EQ(recovering->loss_history(), reference->loss_history());
}

TEST(Trainer, OptimizerInBackwardTrainsAsTheStepAfterBackwardDoes) {
  torch::set_num_threads(1);
  Fixture f;  // dropout on: both runs draw the same masks
  f.config.train.grad_clip = 0;
  f.plan.micro_batch_size = 8;
  f.plan.grad_accum_steps = 1;
  auto after = f.make("after");
  after->fit();
  f.plan.optimizer_step = OptimizerStep::InBackward;
  auto inside = f.make("inside");
  ASSERT_TRUE(inside->optimizer_in_backward());
  TrainResult r = inside->fit();
  EXPECT_EQ(r.steps, 6);
  ASSERT_EQ(inside->loss_history().size(), after->loss_history().size());
  for (size_t i = 0; i < after->loss_history().size(); ++i) {
    EXPECT_NEAR(inside->loss_history()[i], after->loss_history()[i], 1e-5) << "step " << i + 1;
  }
  auto a = after->model().module().named_parameters(), b = inside->model().module().named_parameters();
  for (const auto& item : a) EXPECT_TRUE(torch::allclose(item.value(), b[item.key()], 0, 1e-5)) << item.key();

  // It cannot split a step, so an out-of-memory error stops the run with what to change.
  auto oom = f.make("oom");
  TrainerTestSeam::inject_oom_at_step(*oom, 1);
  try {
    oom->fit();
    ADD_FAILURE() << "expected an error";
  } catch (const HardwareError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer_in_backward"), std::string::npos) << e.what();
  }
  // fp16 cannot come back at run time; a checkpoint that accumulates cannot be resumed into it;
  // a hand-made plan that accumulates is refused.
  EXPECT_THROW(inside->enable_mixed_precision(Precision::Fp16), ConfigError);
  f.plan.optimizer_step = OptimizerStep::AfterBackward;
  f.plan.micro_batch_size = 4;
  f.plan.grad_accum_steps = 2;
  auto accumulating = f.make("accumulating");
  accumulating->fit();
  const auto checkpoint = accumulating->save_checkpoint();
  f.plan.optimizer_step = OptimizerStep::InBackward;
  f.plan.micro_batch_size = 8;
  f.plan.grad_accum_steps = 1;
  EXPECT_THROW(f.make("resumed")->resume_from(checkpoint), ConfigError);
  f.plan.micro_batch_size = 4;
  f.plan.grad_accum_steps = 2;
  EXPECT_THROW(f.make("hand-made"), ConfigError);
}

TEST(Trainer, CallbacksCanStopAndCheckpointsAreWritten) {
  Fixture f;
  f.config.train.max_steps = 50;
  auto t = f.make("cb");
  struct StopAt : Callback {
    std::string name() const override { return "stop"; }
    void on_step_end(TrainerControl& c, const StepMetrics&) override {
      if (c.step() == 2) c.request_stop("test");
    }
  };
  t->add_callback(std::make_shared<StopAt>());
  ModelCheckpointOptions o;
  o.every_steps = 1;
  t->add_callback(std::make_shared<ModelCheckpoint>(o));
  TrainResult r = t->fit();
  EXPECT_EQ(r.steps, 2);
  EXPECT_EQ(r.stop_reason, "test");
  ASSERT_TRUE(r.last_checkpoint.has_value());
  EXPECT_TRUE(std::filesystem::exists(f.dir / "cb" / "checkpoints" / "step_00000002"));
}

TEST(Trainer, EvaluateIsRepeatable) {
  Fixture f;
  auto t = f.make("eval");
  EXPECT_EQ(t->evaluate(), t->evaluate());
}

}  // namespace
}  // namespace hwt
