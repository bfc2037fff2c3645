#include "hwtrain/sweep/sweep_outputs.h"

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include "hwtrain/core/error.h"
#include "support/error_of.h"
#include "support/shell.h"
#include "support/temp_dir.h"

namespace hwt::sweep {
namespace {

using hwt::testing::error_of;
using hwt::testing::read_text;
using hwt::testing::TempDir;

Trial out_trial(std::int64_t number, TrialState state, std::optional<double> value, double lr, std::string reason = "") {
  Trial t;
  t.number = number;
  t.state = state;
  t.value = value;
  t.params = {{"train.lr", lr}, {"optimization.mixed_precision_dtype", std::string("bf16")}};
  t.reason = std::move(reason);
  return t;
}

TEST(SweepOutputs, TableListsCompleteTrialsBestFirstThenPrunedThenTheRest) {
  const std::vector<Trial> trials = {
      out_trial(0, TrialState::kComplete, 2.5, 1e-3),
      out_trial(1, TrialState::kFailed, std::nullopt, 3e-3, "exit code 3: error: out of memory"),
      out_trial(2, TrialState::kComplete, 1.5, 2e-4),
      out_trial(3, TrialState::kPruned, 4.0, 1e-4, "pruned at step 10"),
  };
  const std::string table = format_trials_table(trials, "val_loss", Direction::kMin, {{2, 12.4}});
  const auto line_of = [&](const std::string& s) { return table.find(s); };
  EXPECT_LT(line_of("trial  state"), line_of("2      complete"));
  EXPECT_LT(line_of("2      complete"), line_of("0      complete"));
  EXPECT_LT(line_of("0      complete"), line_of("3      pruned"));
  EXPECT_LT(line_of("3      pruned"), line_of("1      failed"));
  EXPECT_NE(table.find("1.5       12"), std::string::npos) << table;
  EXPECT_NE(table.find("train.lr=0.0002"), std::string::npos) << table;
  EXPECT_NE(table.find("exit code 3: error: out of memory"), std::string::npos) << table;
  // direction = max: values are shown as reported, not as stored (negated)
  const std::string max_table = format_trials_table({out_trial(0, TrialState::kComplete, -0.75, 1e-3)}, "acc", Direction::kMax);
  EXPECT_NE(max_table.find(" 0.75 "), std::string::npos) << max_table;
}

TEST(SweepOutputs, BestConfigMergesTheBaseAndKeepsTheTypesHwtrainReads) {
  TempDir dir;
  const auto base = dir.write("run.toml", "[train]\nlr = 0.1\nsteps = 100\n[model]\nn_layer = 2\n");
  const Params params = {{"train.lr", 0.0003},
                         {"model.n_layer", std::int64_t{6}},
                         {"optimization.mixed_precision_dtype", std::string("bf16")},
                         {"model.bias", std::string("true")},
                         {"train.micro_batch_size", std::string("4")},
                         {"train.dropout", std::string("0.1")}};
  const auto out = dir / "best.toml";
  write_best_config(out, base, params, "best trial 3 of study demo\nval_loss = 1.25");
  const std::string text = read_text(out);
  EXPECT_EQ(text.rfind("# best trial 3 of study demo\n# val_loss = 1.25\n", 0), 0u) << text;
  const toml::table doc = toml::parse(text);
  EXPECT_EQ(doc["train"]["lr"].value<double>(), 0.0003);
  EXPECT_EQ(doc["train"]["steps"].value<std::int64_t>(), 100);
  EXPECT_TRUE(doc["model"]["n_layer"].is_integer());
  EXPECT_EQ(doc["model"]["n_layer"].value<std::int64_t>(), 6);
  EXPECT_EQ(doc["optimization"]["mixed_precision_dtype"].value<std::string>(), "bf16");
  EXPECT_TRUE(doc["model"]["bias"].is_boolean());
  EXPECT_TRUE(doc["train"]["micro_batch_size"].is_integer());
  EXPECT_TRUE(doc["train"]["dropout"].is_floating_point());
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_NE(entry.path().filename().string().rfind(".best.toml", 0), 0u) << "temp file left: " << entry.path();
  }
}

// A string key's choice that looks like a number stays text, as `--set key=42` gave it to the trial.
TEST(SweepOutputs, AStringKeysNumericChoiceStaysText) {
  const Params params = {{"data.tokenizer", std::string("42")}, {"train.micro_batch_size", std::string("4")}};
  const auto is_text = [](const std::string& key, const std::string&) { return key == "data.tokenizer"; };
  const toml::table doc = toml::parse(best_config_toml("", "run.toml", params, "", is_text));
  EXPECT_EQ(doc["data"]["tokenizer"].value<std::string>(), "42");
  EXPECT_TRUE(doc["train"]["micro_batch_size"].is_integer());
  EXPECT_TRUE(toml::parse(best_config_toml("", "run.toml", params, ""))["data"]["tokenizer"].is_integer());  // untyped
}

TEST(SweepOutputs, BestConfigWithoutABaseAndWithAConflictingOne) {
  TempDir dir;
  write_best_config(dir / "best.toml", "", {{"train.lr", 0.5}}, "");
  EXPECT_EQ(toml::parse(read_text(dir / "best.toml"))["train"]["lr"].value<double>(), 0.5);
  const std::string message = error_of<ConfigError>([] {
    best_config_toml("train = 3\n", "run.toml", {{"train.lr", 0.5}}, "");
  });
  EXPECT_NE(message.find("run.toml: train is a value"), std::string::npos) << message;
  EXPECT_NE(error_of<ConfigError>([] { best_config_toml("[train\n", "run.toml", {}, ""); }).find("run.toml:1"),
            std::string::npos);
}

}  // namespace
}  // namespace hwt::sweep
