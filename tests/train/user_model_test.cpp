// A user's own module trained by the Trainer (issue 22): an MLP regression on synthetic examples
// through ModuleModel and ExampleData, with gradient accumulation, checkpoints, a bitwise resume
// and 2-rank data parallelism equal to one rank; the built-in GPT keeps its own tests
// (trainer_test.cpp, golden losses) through GptModel. Also the bad inputs: a non-scalar loss, an
// example of another shape, ZeRO-3 without unit hooks, a weight registered twice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "dist/dist_test_util.h"
#include "hwtrain/core/error.h"
#include "hwtrain/dist/ddp.h"
#include "hwtrain/dist/process_group.h"
#include "hwtrain/model/trainable_model.h"
#include "hwtrain/train/sharded_training.h"
#include "hwtrain/train/sharded_checkpoint.h"
#include "hwtrain/train/trainer.h"
#include "train/trainer_test_seam.h"
#include "support/temp_dir.h"

namespace hwt {
namespace {

struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

// y = sum of squares of x: a smooth target an MLP fits.
std::shared_ptr<ExampleSource> examples(int64_t n, uint64_t seed, const std::string& name) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto x = torch::randn({n, 8}, gen);
  auto y = x.pow(2).sum(1, true) / 8.0;
  return std::make_shared<TensorExamples>(x, y, name);
}

std::shared_ptr<TrainableModel> mlp_model() {
  torch::manual_seed(0);
  return make_module_model(Mlp(), [](const torch::Tensor& out, const torch::Tensor& y) { return torch::mse_loss(out, y); });
}

TrainerOptions options(int64_t steps) {
  TrainerOptions o;
  o.train.max_steps = steps;
  o.train.warmup_steps = 2;
  o.train.lr = 3e-3;
  o.train.min_lr = 3e-4;
  o.train.eval_interval = 5;
  o.train.eval_batches = 2;
  o.train.grad_clip = 1.0;
  o.checkpoint.keep_last = 10;
  o.checkpoint.interval = 0;
  o.config_toml = "# a user model's run\n";
  return o;
}

Plan plan(int64_t micro, int64_t accum) {
  Plan p;
  p.micro_batch_size = micro;
  p.grad_accum_steps = accum;
  p.num_workers = 1;
  return p;
}

std::shared_ptr<const TrainingData> data() {
  return std::make_shared<ExampleData>(examples(256, 1, "training examples"), examples(64, 2, "validation examples"));
}

TEST(UserModel, TrainerFitsAnMlpOnExamplesAndEvaluates) {
  testing::TempDir dir;
  Trainer trainer(options(40), plan(16, 1), mlp_model(), data(), dir / "run");
  const double before = trainer.evaluate();
  TrainResult r = trainer.fit();
  EXPECT_EQ(r.steps, 40);
  EXPECT_LT(r.final_val_loss, 0.5 * before) << "val loss " << before << " -> " << r.final_val_loss;
  EXPECT_EQ(r.tokens_seen, 40 * 16);  // rows: a row of examples counts as one
  EXPECT_TRUE(std::isfinite(r.final_loss));
}

TEST(UserModel, AccumulationEqualsOneLargeMicroBatch) {
  testing::TempDir dir;
  Trainer whole(options(8), plan(16, 1), mlp_model(), data(), dir / "a");
  Trainer accumulated(options(8), plan(4, 4), mlp_model(), data(), dir / "b");
  whole.fit();
  accumulated.fit();
  ASSERT_EQ(whole.loss_history().size(), accumulated.loss_history().size());
  for (size_t i = 0; i < whole.loss_history().size(); ++i) {
    EXPECT_NEAR(whole.loss_history()[i], accumulated.loss_history()[i], 1e-6) << "step " << i + 1;
  }
}

// Saves a checkpoint after step `at` and goes on.
class CheckpointAt : public Callback {
 public:
  explicit CheckpointAt(int64_t at) : at_(at) {}
  std::string name() const override { return "checkpoint-at"; }
  void on_step_end(TrainerControl& t, const StepMetrics&) override {
    if (t.step() == at_) saved = t.save_checkpoint();
  }
  std::filesystem::path saved;

 private:
  int64_t at_;
};

TEST(UserModel, ResumeFromACheckpointIsBitwiseIdentical) {
  testing::TempDir dir;
  Trainer straight(options(10), plan(8, 2), mlp_model(), data(), dir / "straight");
  auto at4 = std::make_shared<CheckpointAt>(4);
  straight.add_callback(at4);
  straight.fit();
  ASSERT_FALSE(at4->saved.empty());

  Trainer resumed(options(10), plan(8, 2), mlp_model(), data(), dir / "resumed");
  resumed.resume_from(at4->saved);
  resumed.fit();
  ASSERT_EQ(resumed.loss_history().size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(resumed.loss_history()[i], straight.loss_history()[4 + i]) << "step " << 5 + i;  // bit for bit
  }
  for (const auto& item : resumed.model().module().named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), straight.model().module().named_parameters()[item.key()])) << item.key();
  }
}

TEST(UserModel, ANonScalarLossIsRefusedNamingItsShape) {
  testing::TempDir dir;
  auto model = make_module_model(Mlp(), [](const torch::Tensor& out, const torch::Tensor& y) { return (out - y).pow(2); });
  Trainer trainer(options(2), plan(4, 1), model, data(), dir / "run");
  try {
    trainer.fit();
    FAIL() << "a [4, 1] loss trained";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the loss has shape [4, 1]; it must be a scalar"), std::string::npos) << e.what();
  }
}

// A weight registered in two modules (a tied weight done so) is listed twice by LibTorch: refused,
// naming both, rather than updated twice per step.
TEST(UserModel, AWeightRegisteredTwiceIsRefusedNamingBoth) {
  testing::TempDir dir;
  Mlp mlp;
  auto tied = std::make_shared<torch::nn::Module>();
  tied->register_parameter("w", mlp->fc1->weight);
  mlp->register_module("tied", tied);
  auto model = make_module_model(mlp, [](const torch::Tensor& out, const torch::Tensor& y) { return torch::mse_loss(out, y); });
  try {
    Trainer trainer(options(2), plan(4, 1), model, data(), dir / "run");
    FAIL() << "a model with a parameter registered twice was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'tied.w' is the same tensor as 'fc1.weight'"), std::string::npos)
        << e.what();
  }
}

class Ragged : public ExampleSource {
 public:
  int64_t size() const override { return 8; }
  Example get(int64_t i) const override { return {torch::zeros({i == 5 ? 9 : 8}), torch::zeros({1})}; }
  std::string name() const override { return "ragged examples"; }
};

TEST(UserModel, AnExampleOfAnotherShapeIsNamed) {
  testing::TempDir dir;
  Plan p = plan(8, 1);
  p.num_workers = 0;
  Trainer trainer(options(2), p, mlp_model(), std::make_shared<ExampleData>(std::make_shared<Ragged>()), dir / "run");
  try {
    trainer.fit();
    FAIL() << "ragged examples stacked";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("ragged examples: example 5 has input [9]"), std::string::npos) << e.what();
  }
}

TEST(UserModel, ZeroThreeWithoutUnitHooksIsRefused) {
  auto model = mlp_model();
  AdamW whole({}, {}, AdamWOptions{});
  auto group = testing::one_rank_group();
  try {
    shard_training(*model, whole, group, ShardStage::Zero3, Precision::Fp32);
    FAIL() << "zero3 without hooks";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("does not run unit hooks"), std::string::npos) << e.what();
  }
  group->shutdown();
}

// A module with a buffer (BatchNorm's running statistics): saved, restored, and checked.
struct NormedImpl : torch::nn::Module {
  NormedImpl() {
    fc = register_module("fc", torch::nn::Linear(8, 1));
    bn = register_module("bn", torch::nn::BatchNorm1d(8));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc(bn(x)); }
  torch::nn::Linear fc{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};
TORCH_MODULE(Normed);

std::shared_ptr<TrainableModel> normed_model() {
  torch::manual_seed(0);
  return make_module_model(Normed(), torch::mse_loss);
}

TEST(UserModel, CheckpointsCarryBuffersAndRefuseOtherModels) {
  testing::TempDir dir;
  Trainer first(options(3), plan(8, 1), normed_model(), data(), dir / "a");
  first.fit();
  const auto checkpoint = first.save_checkpoint();
  EXPECT_EQ(checkpoint_model_format(checkpoint), "hwtrain-module");
  Trainer second(options(3), plan(8, 1), normed_model(), data(), dir / "b");
  second.resume_from(checkpoint);
  auto a = first.model().module().named_buffers(), b = second.model().module().named_buffers();
  EXPECT_TRUE(torch::equal(a["bn.running_mean"], b["bn.running_mean"]));
  EXPECT_FALSE(torch::equal(b["bn.running_mean"], torch::zeros({8})));  // trained, not the initial
  // eval/generate/export take hwtrain's own models only; an MLP cannot resume a BatchNorm model.
  EXPECT_THROW(
      try { require_builtin_model_checkpoint(checkpoint); } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find("holds a library model"), std::string::npos) << e.what();
        throw;
      },
      IoError);
  Trainer other(options(3), plan(8, 1), mlp_model(), data(), dir / "c");
  EXPECT_THROW(other.resume_from(checkpoint), IoError);
}

TEST(UserModel, AStepLargerThanTheExamplesIsRefused) {
  testing::TempDir dir;
  auto small = std::make_shared<ExampleData>(examples(12, 1, "twelve examples"));
  try {
    Trainer trainer(options(2), plan(8, 2), mlp_model(), small, dir / "run");
    FAIL() << "16 rows per step from 12 examples";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("twelve examples holds 12 examples, fewer than the 16 rows"), std::string::npos)
        << e.what();
  }
}

TEST(UserModel, ValidationCoversTheWholeSetWhateverTheMicroBatch) {
  testing::TempDir dir;
  auto d = std::make_shared<ExampleData>(examples(256, 1, "train"), examples(50, 2, "validation"));
  Trainer by7(options(1), plan(7, 1), mlp_model(), d, dir / "a");
  Trainer by25(options(1), plan(25, 1), mlp_model(), d, dir / "b");
  EXPECT_NEAR(by7.evaluate(), by25.evaluate(), 1e-6);  // 50 rows: 8 batches (the last of 1) or 2
}

TEST(UserModel, AnOutOfMemoryRetryKeepsEveryRowOfTheStep) {
  testing::TempDir dir;
  Trainer trainer(options(1), plan(15, 1), mlp_model(), data(), dir / "run");
  TrainerTestSeam::inject_oom_at_step(trainer, 0);
  trainer.fit();
  EXPECT_EQ(trainer.micro_batch_size(), 5);  // halving gave 7: 2 x 7 = 14 of the 15 rows
  EXPECT_EQ(trainer.micro_batch_size() * trainer.grad_accum_steps(), 15);
}

// Rank r of a 2-rank run: the same global batch of 16 rows as one rank, 8 rows here.
TEST(DistWorker, UserModelDataParallel) {
  HWT_WORKER_ONLY();
  DistConfig config;
  config.timeout = 30;
  const DistEnv env = read_dist_env();
  auto group = std::make_shared<ProcessGroup>(env, config);
  testing::TempDir dir;
  Trainer trainer(options(6), plan(4, 2), mlp_model(), data(), dir / "run", env.rank, env.world_size);
  trainer.set_loss_reducer([group](double loss) { return group->mean_across_ranks(loss, "averaging the loss"); });
  trainer.set_gradient_sync(std::make_shared<DataParallel>(group, trainer.model().module().parameters(), DataParallelOptions{}));
  trainer.fit();
  if (env.rank == 0) {
    std::ofstream out(std::getenv("HWT_LOSSES_FILE"));
    out.precision(17);
    for (double l : trainer.loss_history()) out << l << "\n";
  }
  group->shutdown();
}

TEST(UserModel, TwoRanksOfDataParallelEqualOneRank) {
  testing::TempDir dir;
  Trainer one(options(6), plan(8, 2), mlp_model(), data(), dir / "one");
  one.fit();
  const auto file = (dir / "losses.txt").string();
  auto run = testing::run_workers("UserModelDataParallel", 2, {{"HWT_LOSSES_FILE", file}});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.reason << "\n" << run.output();
  std::ifstream in(file);
  std::vector<double> two;
  for (double l; in >> l;) two.push_back(l);
  ASSERT_EQ(two.size(), one.loss_history().size());
  for (size_t i = 0; i < two.size(); ++i) EXPECT_NEAR(two[i], one.loss_history()[i], 1e-6) << "step " << i + 1;
}

}  // namespace
}  // namespace hwt
