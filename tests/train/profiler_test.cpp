// ProfilerCallback: the step-phase trace from scripted StepMetrics, LibTorch's operator trace
// around real tensor work, and both from a real (tiny) training run.
#include <gtest/gtest.h>

#include "hwtrain/data/sharded_dataset.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/obs_config.h"
#include "hwtrain/obs/profile_report.h"
#include "hwtrain/train/profiler_callback.h"
#include "hwtrain/train/trainer.h"
#include "train/trainer_fixture.h"
#include "support/temp_dir.h"
#include "train/fake_control.h"

namespace hwt {
namespace {

using json = nlohmann::json;
using testing::FakeTrainerControl;

// Step s takes 1 s and ends at s + 0.5 s (the 0.5 s gap stands for evaluation or logging).
StepMetrics scripted_step(int64_t s) {
  StepMetrics m;
  m.step = s;
  m.loss = 5.0 - 0.1 * static_cast<double>(s);
  m.tokens_per_second = 1000;
  m.elapsed_seconds = static_cast<double>(s) * 1.5;
  m.step_seconds = 1.0;
  m.data_wait_seconds = 0.05;
  m.forward_seconds = 0.25;
  m.backward_seconds = 0.5;
  m.optimizer_seconds = 0.125;
  m.rss_bytes = 1e9;
  return m;  // comm_seconds stays unknown (NaN): no comm phase
}

json read_json(const std::filesystem::path& p) { return json::parse(read_file(p)); }

TEST(ProfileSteps, ParsesRanges) {
  EXPECT_EQ(parse_profile_steps("3:7").first, 3);
  EXPECT_EQ(parse_profile_steps("3:7").last, 7);
  EXPECT_EQ(parse_profile_steps("5:5").last, 5);
  for (const char* bad : {"", "3", "7:3", "0:2", "a:b", "3:7:9", "-1:2", "1:1234567890123"}) {
    EXPECT_THROW(parse_profile_steps(bad), ConfigError) << bad;
    ObsConfig o;  // the config's check is the same rule: `plan` refuses what `train` refuses
    o.profile_steps = bad;
    if (*bad) {
      EXPECT_THROW(o.validate(), ConfigError) << bad;
    }
  }
}

TEST(ProfileSteps, OtherRanksGetTheirOwnFiles) {
  EXPECT_EQ(rank_file_name("trace.json", 0), "trace.json");
  EXPECT_EQ(rank_file_name("ops_trace.json", 3), "ops_trace.rank3.json");
}

TEST(ProfilerCallback, WritesPhasesOfStepsAToB) {
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  ProfilerOptions o;
  o.steps = {3, 5};
  o.operators = false;
  ProfilerCallback cb(o);
  cb.on_train_begin(t);
  for (int s = 1; s <= 8; ++s) {
    t.current_step = s;
    cb.on_step_end(t, scripted_step(s));
    if (s < 5) {
      EXPECT_FALSE(std::filesystem::exists(dir / "trace.json")) << "written early, at step " << s;
    }
  }
  cb.on_train_end(t);
  EXPECT_EQ(cb.phase_trace_path(), dir / "trace.json");
  EXPECT_TRUE(cb.ops_trace_path().empty());
  const json trace = read_json(dir / "trace.json");
  const json& events = trace.at("traceEvents");
  std::vector<std::string> steps;
  std::map<std::string, int> phase_counts;
  for (const auto& e : events) {
    if (e.at("ph") != "X") continue;
    if (e.at("cat") == "step") steps.push_back(e.at("name").get<std::string>());
    if (e.at("cat") == kPhaseCategory) phase_counts[e.at("name").get<std::string>()]++;
    if (e.at("name") == "step 4") {
      EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 5.0e6);  // ends at 6 s, lasted 1 s
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 1.0e6);
    }
    if (e.at("name") == "backward" && e.at("args").at("step") == 4) {
      EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 5.3e6);  // after data wait and forward
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 0.5e6);
    }
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"step 3", "step 4", "step 5"}));
  EXPECT_EQ(phase_counts,
            (std::map<std::string, int>{{"data_wait", 3}, {"forward", 3}, {"backward", 3}, {"optimizer", 3}}));
  auto phases = phase_summary(read_file(dir / "trace.json"));
  ASSERT_EQ(phases.size(), 4u);
  EXPECT_EQ(phases[2].name, "backward");
  EXPECT_NEAR(phases[2].total_ms, 1500.0, 1e-6);
}

TEST(ProfilerCallback, RunStoppedBeforeTheRangeEndsStillWritesItsSteps) {
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  ProfilerOptions o;
  o.steps = {2, 10};
  o.operators = false;
  ProfilerCallback cb(o);
  cb.on_train_begin(t);
  for (int s = 1; s <= 3; ++s) cb.on_step_end(t, scripted_step(s));
  cb.on_train_end(t);
  EXPECT_EQ(phase_summary(read_file(dir / "trace.json")).at(0).calls, 2);
}

TEST(ProfilerCallback, RecordsOperatorsWithLibTorchsProfiler) {
  torch::set_num_threads(1);
  hwt::testing::TempDir dir;
  FakeTrainerControl t(dir.path());
  ProfilerOptions o;
  o.steps = {2, 3};
  ProfilerCallback cb(o);
  cb.on_train_begin(t);
  auto a = torch::randn({64, 64});
  for (int s = 1; s <= 4; ++s) {
    auto b = s == 2 || s == 3 ? torch::mm(a, a) : torch::relu(a);  // only mm inside the range
    (void)b;
    t.current_step = s;
    cb.on_step_end(t, scripted_step(s));
  }
  cb.on_train_end(t);
  ASSERT_EQ(cb.ops_trace_path(), dir / "ops_trace.json") << "LibTorch's profiler did not write a trace";
  const std::string text = read_file(dir / "ops_trace.json");
  EXPECT_NO_THROW(json::parse(text));
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("\"ProfilerStep#2\""), 1u);  // one range per step
  EXPECT_EQ(count("\"ProfilerStep#3\""), 1u);
  EXPECT_EQ(text.find("ProfilerStep#4"), std::string::npos);
  auto ops = top_operators(text);
  auto has = [&](const std::string& name) {
    return std::any_of(ops.begin(), ops.end(), [&](const OpStat& op) { return op.name == name; });
  };
  EXPECT_TRUE(has("aten::mm"));
  EXPECT_FALSE(has("aten::relu"));
  for (const auto& op : ops) EXPECT_LE(op.self_ms, op.total_ms + 1e-9) << op.name;
}

TEST(ProfilerCallback, ProfilesARealTrainingRun) {
  torch::set_num_threads(1);
  hwt::testing::TempDir dir;
  std::vector<int32_t> train, val;
  for (int i = 0; i < 4000; ++i) train.push_back((i * 7 + i / 13) % 64);
  for (int i = 0; i < 400; ++i) val.push_back((i * 5) % 64);
  write_token_file(dir / "d.hwt", 64, "byte", 1, train, val);
  auto data = std::make_shared<const ShardedDataset>(dir / "d.hwt");
  TrainerTestConfig config;
  config.model.n_layer = 1;
  config.model.n_head = 2;
  config.model.n_embd = 32;
  config.model.block_size = 16;
  config.model.vocab_size = 64;
  config.train.max_steps = 4;
  config.train.eval_interval = 0;
  Plan plan;
  plan.micro_batch_size = 4;
  plan.grad_accum_steps = 2;
  torch::manual_seed(1);
  GPT model(config.model, config.model.vocab_size);
  Trainer trainer(trainer_options(config), plan, model, data, dir / "run");
  ProfilerOptions o;
  o.steps = {2, 3};
  trainer.add_callback(std::make_shared<ProfilerCallback>(o));
  trainer.fit();
  const json trace = read_json(dir / "run" / "trace.json");
  int num_steps = 0;
  for (const auto& e : trace.at("traceEvents")) num_steps += e.value("cat", "") == "step";
  EXPECT_EQ(num_steps, 2);
  // Only the phases the trainer times with finite values appear; data wait always is.
  auto phases = phase_summary(trace.dump());
  ASSERT_GE(phases.size(), 1u);
  EXPECT_EQ(phases[0].name, "data_wait");
  EXPECT_EQ(phases[0].calls, 2);
  auto ops = top_operators(read_file(dir / "run" / "ops_trace.json"));
  ASSERT_FALSE(ops.empty());
  EXPECT_EQ(ops[0].device, "cpu");
  std::ostringstream report;
  EXPECT_EQ(run_profile_report(dir / "run", 10, report), 0);
  EXPECT_NE(report.str().find("aten::"), std::string::npos) << report.str();
  EXPECT_NE(report.str().find("data_wait"), std::string::npos) << report.str();
  EXPECT_EQ(report.str().find("ProfilerStep"), std::string::npos) << "step ranges are not operators";
}

}  // namespace
}  // namespace hwt
