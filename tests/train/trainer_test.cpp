// The trainer end to end on a tiny model: determinism, bitwise-identical resume, OOM recovery.
#include "hwtrain/train/trainer.h"

#include <gtest/gtest.h>

#include "hwtrain/train/model_checkpoint.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

struct Fixture {
  testing::TempDir dir;
  std::shared_ptr<const TokenFile> data;
  RunConfig config;
  Plan plan;

  Fixture() {
    std::vector<int32_t> train, val;
    for (int i = 0; i < 4000; ++i) train.push_back((i * 7 + i / 13) % 64);
    for (int i = 0; i < 400; ++i) val.push_back((i * 5) % 64);
    write_token_file(dir / "d.hwt", 64, "byte", 1, train, val);
    data = std::make_shared<const TokenFile>(dir / "d.hwt");
    config.model.n_layer = 2;
    config.model.n_head = 2;
    config.model.n_embd = 32;
    config.model.block_size = 16;
    config.model.vocab_size = 64;
    config.model.dropout = 0.1;  // exercises the RNG state in checkpoints
    config.train.max_steps = 6;
    config.train.warmup_steps = 2;
    config.train.eval_interval = 0;
    config.train.eval_batches = 2;
    config.train.lr = 1e-2;
    config.checkpoint.keep_last = 5;
    plan.micro_batch_size = 4;
    plan.grad_accum_steps = 2;
  }

  std::unique_ptr<Trainer> make(const std::string& run) {
    torch::manual_seed(config.train.seed);
    GPT model(config.model, config.model.vocab_size);
    return std::make_unique<Trainer>(config, plan, model, data, dir / run);
  }
};

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

TEST(Trainer, ResumeGivesBitwiseIdenticalLosses) {
  torch::set_num_threads(1);
  Fixture f;
  auto full = f.make("full");
  full->fit();

  f.config.train.max_steps = 3;
  auto first = f.make("part");
  first->fit();
  auto ckpt = first->save_checkpoint();
  ASSERT_TRUE(std::filesystem::exists(ckpt / "model.safetensors"));

  f.config.train.max_steps = 6;
  auto second = f.make("part");
  second->resume_from(ckpt);
  EXPECT_EQ(second->step(), 3);
  second->fit();
  ASSERT_EQ(second->loss_history().size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(second->loss_history()[i], full->loss_history()[3 + i]) << "step " << 4 + i;
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
  recovering->inject_oom_at_step(0);
  TrainResult r = recovering->fit();
  EXPECT_EQ(r.oom_recoveries, 1);
  EXPECT_EQ(recovering->micro_batch_size(), 2);
  EXPECT_EQ(recovering->grad_accum_steps(), 4);
  EXPECT_EQ(r.tokens_seen, 6 * 8 * 16);  // the global batch did not change
  EXPECT_EQ(recovering->loss_history(), reference->loss_history());
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
