// The sweep's view of a run (run/sweep_binding.h): values of a space tried on the base config, and
// how many trials share a machine, planned for described GPUs (no GPU needed here).
#include "hwtrain/run/sweep_binding.h"

#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/hw/hardware_preset.h"

namespace hwt {
namespace {

sweep::SweepConfig space_of(const std::string& key, std::vector<std::string> choices) {
  sweep::SweepConfig c;
  c.sweep_file = "sweep.toml";
  sweep::ParamSpec p;
  p.key = key;
  p.kind = sweep::ParamKind::kChoice;
  p.choices = std::move(choices);
  c.space.params = {p};
  return c;
}

TEST(SweepBinding, EveryValueOfTheSpaceIsTriedOnTheBaseConfig) {
  RunConfig base;
  EXPECT_NO_THROW(check_space_values(space_of("optimization.mixed_precision_dtype", {"bf16", "fp32"}), base));
  try {
    check_space_values(space_of("optimization.mixed_precision_dtype", {"bf16", "bf17"}), base);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("sweep.toml"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bf17"), std::string::npos) << msg;
    EXPECT_NE(msg.find("optimization.mixed_precision_dtype"), std::string::npos) << msg;
  }
  // Against the base, not the defaults: an lr below a min_lr the base sets is refused, fine once it
  // is 0 or -1 (lr / 10, the default, so a space over lr alone works).
  sweep::SweepConfig lr = space_of("train.lr", {});
  lr.space.params[0].kind = sweep::ParamKind::kLogUniform;
  lr.space.params[0].low = 1e-5;
  lr.space.params[0].high = 1e-2;
  EXPECT_NO_THROW(check_space_values(lr, base));
  base.train.min_lr = 2e-4;
  EXPECT_THROW(check_space_values(lr, base), ConfigError);
  base.train.min_lr = 0;
  EXPECT_NO_THROW(check_space_values(lr, base));
  // A continuous range over a whole-number key: its bounds print as whole numbers, its draws do not.
  sweep::SweepConfig steps = space_of("train.max_steps", {});
  steps.space.params[0].kind = sweep::ParamKind::kUniform;
  steps.space.params[0].low = 1;
  steps.space.params[0].high = 3;
  try {
    check_space_values(steps, base);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("for a whole-number key use type = \"int\""), std::string::npos) << e.what();
  }
  steps.space.params[0].kind = sweep::ParamKind::kInt;
  EXPECT_NO_THROW(check_space_values(steps, base));
  EXPECT_TRUE(sweep_key_checks().is_config_key("train.lr"));
  EXPECT_FALSE(sweep_key_checks().is_config_key("train.lrr"));
}

// Keys the sweep sets for every trial cannot be searched (the trial's value would silently lose).
TEST(SweepBinding, KeysTheSweepSetsPerTrialAreNotSearched) {
  RunConfig base;
  try {
    check_space_values(space_of("optimization.intra_op_threads", {"3", "4"}), base);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("\"optimization.intra_op_threads\" cannot be searched"), std::string::npos)
        << e.what();
  }
}

// An objective no trial of the base config reports is refused before any trial runs.
TEST(SweepBinding, AnObjectiveNoTrialReportsIsRefusedUpFront) {
  RunConfig base;
  base.train.max_steps = 40;
  base.train.eval_interval = 10;
  sweep::SweepConfig c = space_of("train.lr", {"0.001", "0.01"});
  EXPECT_NO_THROW(check_objective_reported(c, base));
  auto message = [&](const RunConfig& b, const sweep::SweepConfig& s) {
    try {
      check_objective_reported(s, b);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  RunConfig never = base;
  never.train.eval_interval = 0;
  EXPECT_NE(message(never, c).find("sweep.objective = 'val_loss' is an evaluation metric"), std::string::npos);
  c.objective = "loss";
  EXPECT_EQ(message(never, c), "accepted");  // a training metric needs no evaluation
  c.objective = "val_loss";
  c.at_step = 100;
  EXPECT_NE(message(base, c).find("sweep.at_step = 100 is past the base config's train.max_steps = 40"),
            std::string::npos);
  c.at_step = 15;
  EXPECT_NE(message(base, c).find("sweep.at_step = 15 evaluates no 'val_loss'"), std::string::npos);
  c.at_step = 20;
  EXPECT_EQ(message(base, c), "accepted");
  sweep::SweepConfig steps = space_of("train.max_steps", {"200", "400"});  // searched: left to the trials
  steps.at_step = 100;
  EXPECT_EQ(message(base, steps), "accepted");
}

TEST(SweepBinding, AGpuSlotIsAnEntryOfTheVisibleDevices) {
  EXPECT_EQ(trial_visible_device(1, nullptr), "1");
  EXPECT_EQ(trial_visible_device(1, ""), "1");
  EXPECT_EQ(trial_visible_device(0, "2,3"), "2");
  EXPECT_EQ(trial_visible_device(1, "2, 3"), "3");
  EXPECT_EQ(trial_visible_device(0, "GPU-5f1c,GPU-77aa"), "GPU-5f1c");
}

TEST(SweepBinding, SmallTrialsShareAGpuAndLargeOnesGetOneEach) {
  const HardwareProfile h100x8 = *hardware_preset("h100-80gb", 8);
  RunConfig tiny;
  tiny.apply_model_preset("tiny");
  tiny.apply_override("train.micro_batch_size=8");
  std::string note;
  auto in = sweep_parallelism_inputs(h100x8, tiny, 0, 64, &note);
  EXPECT_EQ(in.num_gpus, 8);
  ASSERT_TRUE(in.trial_gpu_bytes.has_value()) << note;
  EXPECT_LT(*in.trial_gpu_bytes, 8ull << 30) << note;
  auto decided = sweep::decide_trial_parallelism(in);
  EXPECT_GT(decided.trials_at_once, 8) << decided.reason;

  RunConfig big;
  big.apply_model_preset("gpt2-large");  // planned at 38 GiB: two would not fit in 90% of 80 GB
  in = sweep_parallelism_inputs(h100x8, big, 0, 64, &note);
  ASSERT_TRUE(in.trial_gpu_bytes.has_value()) << note;
  decided = sweep::decide_trial_parallelism(in);
  EXPECT_EQ(decided.trials_at_once, 8) << decided.reason;

  big.apply_override("data.tokenizer=tok/");  // vocabulary unknown before the tokenizer is read
  in = sweep_parallelism_inputs(h100x8, big, 0, 64, &note);
  EXPECT_FALSE(in.trial_gpu_bytes.has_value());
  EXPECT_NE(note.find("one trial per GPU"), std::string::npos) << note;

  big.apply_override("train.device=cpu");  // trials on the CPU of a GPU machine
  in = sweep_parallelism_inputs(h100x8, big, 0, 64, &note);
  EXPECT_EQ(in.num_gpus, 0);
}

}  // namespace
}  // namespace hwt
