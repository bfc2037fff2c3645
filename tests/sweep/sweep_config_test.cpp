#include "hwtrain/sweep/sweep_config.h"

#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/sweep/sweep_components.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace hwt::sweep {
namespace {

using hwt::testing::error_of;
using hwt::testing::TempDir;

const char* const kCfgExample = R"(
[sweep]
study = "studies/lr.db"
base_config = "run.toml"
trials = 12
time_budget_seconds = 3600
sampler = "random"
pruner = "asha"
seed = 7
parallel = 2
objective = "val_loss"
direction = "min"
at_step = 0
[sweep.asha]
min_resource = 100
reduction_factor = 2
[sweep.space."train.lr"]
type = "log_uniform"
low = 1e-4
high = 3e-3
grid_points = 4
[sweep.space."model.n_layer"]
type = "int"
low = 2
high = 8
[sweep.space."optimization.mixed_precision_dtype"]
type = "choice"
values = ["bf16", "fp32"]
)";

SweepKeyChecks cfg_checks() {
  SweepKeyChecks c;
  c.all_config_keys = {"train.lr", "train.warmup_steps", "model.n_layer", "model.bias",
                       "optimization.mixed_precision_dtype", "optimization.intra_op_threads"};
  c.is_config_key = [keys = c.all_config_keys](const std::string& k) {
    return std::find(keys.begin(), keys.end(), k) != keys.end();
  };
  c.metric_names = {"loss", "lr", "val_loss", "val_perplexity"};
  return c;
}

// The example with `from` replaced by `to` (which must occur), parsed from <dir>/sweep.toml.
std::string cfg_error_with(const TempDir& dir, const std::string& from, const std::string& to,
                           const std::vector<std::string>& overrides = {}) {
  std::string text = kCfgExample;
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  dir.write("run.toml", "[train]\nlr = 0.001\n");
  const auto file = dir.write("sweep.toml", text);
  return error_of<ConfigError>([&] { load_sweep_config(file, overrides, cfg_checks()); });
}

TEST(SweepConfig, ParsesEveryKeyAndResolvesPathsNextToTheSweepFile) {
  TempDir dir;
  dir.write("run.toml", "[train]\nlr = 0.001\n");
  const auto file = dir.write("sweep.toml", kCfgExample);
  const SweepConfig c = load_sweep_config(file, {}, cfg_checks());
  EXPECT_EQ(c.study, std::filesystem::absolute(dir / "studies/lr.db").lexically_normal());
  EXPECT_EQ(c.base_config, std::filesystem::absolute(dir / "run.toml").lexically_normal());
  EXPECT_EQ(c.out_dir, std::filesystem::absolute(dir / "studies/lr").lexically_normal());
  EXPECT_EQ(c.trials, 12);
  EXPECT_DOUBLE_EQ(c.time_budget_seconds, 3600);
  EXPECT_EQ(c.sampler, SamplerKind::kRandom);
  EXPECT_EQ(c.pruner, PrunerKind::kAsha);
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.parallel, 2);
  EXPECT_EQ(c.direction, Direction::kMin);
  EXPECT_EQ(c.asha.min_resource, 100);
  EXPECT_EQ(c.asha.reduction_factor, 2);
  ASSERT_EQ(c.space.params.size(), 3u);
  EXPECT_EQ(c.space.params[0].key, "train.lr");
  EXPECT_EQ(c.space.params[0].kind, ParamKind::kLogUniform);
  EXPECT_DOUBLE_EQ(c.space.params[0].low, 1e-4);
  EXPECT_EQ(c.space.params[0].grid_points, 4);
  EXPECT_EQ(c.space.params[1].kind, ParamKind::kInt);
  EXPECT_EQ(c.space.params[2].choices, (std::vector<std::string>{"bf16", "fp32"}));
  EXPECT_NE(make_pruner(c), nullptr);
  EXPECT_EQ(make_sampler(c)->name(), "random");
  EXPECT_EQ(make_study_info(c).name, "lr");
}

TEST(SweepConfig, DefaultsNeedOnlyASpace) {
  const SweepConfig c = parse_sweep_config("[sweep.space.x]\ntype = \"uniform\"\nlow = 0\nhigh = 1\n", "", {}, {});
  EXPECT_EQ(c.trials, 16);
  EXPECT_EQ(c.sampler, SamplerKind::kTpe);
  EXPECT_EQ(c.pruner, PrunerKind::kNone);
  EXPECT_EQ(c.objective, "val_loss");
  EXPECT_EQ(c.study.filename(), "sweep.db");
  EXPECT_EQ(c.out_dir.filename(), "sweep");
  EXPECT_EQ(make_pruner(c), nullptr);
  EXPECT_EQ(make_study_info(c).objective, "val_loss");
}

TEST(SweepConfig, UnquotedNestedSpaceTablesAndTypedChoicesAreAccepted) {
  const SweepConfig c = parse_sweep_config(
      "[sweep.space.train.lr]\ntype = \"loguniform\"\nlow = 1e-4\nhigh = 1e-2\n"
      "[sweep.space.\"model.bias\"]\ntype = \"choice\"\nvalues = [true, false]\n"
      "[sweep.space.\"model.n_layer\"]\ntype = \"choice\"\nvalues = [2, 4, 0.5]\n",
      "", {}, cfg_checks());
  ASSERT_EQ(c.space.params.size(), 3u);
  EXPECT_EQ(c.space.params[0].key, "train.lr");
  EXPECT_EQ(c.space.params[1].choices, (std::vector<std::string>{"true", "false"}));
  EXPECT_EQ(c.space.params[2].choices, (std::vector<std::string>{"2", "4", "0.5"}));
}

TEST(SweepConfig, OverridesSetKeysOfTheSweepTableWithTheirTomlType) {
  TempDir dir;
  dir.write("run.toml", "");
  const auto file = dir.write("sweep.toml", kCfgExample);
  const SweepConfig c = load_sweep_config(
      file, {"sweep.trials=8", "sweep.sampler=tpe", "sweep.asha.min_resource=5", "sweep.direction=max", "sweep.tpe.n_startup_trials=3"},
      cfg_checks());
  EXPECT_EQ(c.trials, 8);
  EXPECT_EQ(c.sampler, SamplerKind::kTpe);
  EXPECT_EQ(c.asha.min_resource, 5);
  EXPECT_EQ(c.direction, Direction::kMax);
  EXPECT_EQ(c.tpe.n_startup_trials, 3);
}

TEST(SweepConfig, OverrideErrorsNameTheSetFlag) {
  TempDir dir;
  EXPECT_NE(cfg_error_with(dir, "trials = 12", "trials = 12", {"sweep.trials=abc"}).find("--set sweep.trials must be an integer"),
            std::string::npos);
  EXPECT_NE(cfg_error_with(dir, "trials = 12", "trials = 12", {"trials=3"}).find("expected sweep.key=value"), std::string::npos);
  EXPECT_NE(cfg_error_with(dir, "trials = 12", "trials = 12", {"sweep.space.x.low=3"}).find("edit [sweep.space]"),
            std::string::npos);
  EXPECT_NE(cfg_error_with(dir, "trials = 12", "trials = 12", {"sweep.trails=3"}).find("did you mean 'trials'"),
            std::string::npos);
}

TEST(SweepConfig, EveryBadInputIsOneLineNamingFileAndKey) {
  TempDir dir;
  const std::string file = (dir / "sweep.toml").string();
  struct Case {
    std::string from, to, expect;
  };
  const std::vector<Case> cases = {
      {"trials = 12", "trails = 12", "sweep.trails is not a sweep option (did you mean 'trials'?)"},
      {"trials = 12", "trials = 0", "sweep.trials = 0 is out of range: must be at least 1"},
      {"trials = 12", "trials = \"8\"", "sweep.trials must be an integer, not the string \"8\""},
      {"sampler = \"random\"", "sampler = \"tpee\"", "sweep.sampler = 'tpee' is not valid: expected one of grid, random, tpe (did you mean 'tpe'?)"},
      {"pruner = \"asha\"", "pruner = \"hyperband\"", "sweep.pruner = 'hyperband' is not valid"},
      {"direction = \"min\"", "direction = \"minimize\"", "sweep.direction = 'minimize' is not valid"},
      {"objective = \"val_loss\"", "objective = \"val_los\"", "sweep.objective = 'val_los' is not a metric (did you mean 'val_loss'?)"},
      {"time_budget_seconds = 3600", "time_budget_seconds = -1", "sweep.time_budget_seconds must be >= 0"},
      {"reduction_factor = 2", "reduction_factor = 1", "sweep.asha.reduction_factor = 1 is out of range"},
      {"reduction_factor = 2", "reduction_facter = 2", "sweep.asha.reduction_facter is not a sweep option (did you mean 'reduction_factor'?)"},
      {"base_config = \"run.toml\"", "base_config = \"missing.toml\"", "sweep.base_config = 'missing.toml': no such file"},
      {"type = \"log_uniform\"", "type = \"log-uniform\"", "sweep.space.\"train.lr\".type = 'log-uniform' is not valid: expected one of uniform, log_uniform, loguniform, int, choice (did you mean 'log_uniform'?)"},
      {"low = 1e-4", "low = 0.0", "sweep.space.train.lr is a log range [0, 0.003]: low must be > 0"},
      {"low = 2\nhigh = 8", "low = 8\nhigh = 2", "sweep.space.model.n_layer has an empty range [8, 2]"},
      {"values = [\"bf16\", \"fp32\"]", "values = []", "sweep.space.optimization.mixed_precision_dtype has an empty choice list"},
      {"values = [\"bf16\", \"fp32\"]", "values = \"bf16\"", "sweep.space.\"optimization.mixed_precision_dtype\".values must be a list of choices"},
      {"[sweep.space.\"train.lr\"]", "[sweep.space.\"train.lrate\"]", "sweep.space.\"train.lrate\" is not an hwtrain config key (did you mean 'train.lr'?)"},
      {"grid_points = 4", "grid_point = 4", "sweep.space.\"train.lr\".grid_point is not a sweep option (did you mean 'grid_points'?)"},
      {"type = \"int\"\nlow = 2", "type = \"int\"\nlog = true\nlow = 2", ""},  // valid: a log int range
      {"type = \"log_uniform\"", "type = \"log_uniform\"\nlog = true", "sweep.space.\"train.lr\".log is only for type = \"int\""},
      {"[sweep]", "[train]\nlr = 1\n[sweep]", "unknown table [train]: a sweep file holds [sweep] only"},
      {"trials = 12", "trials = = 12", "TOML syntax error"},
      // A spec without its type (read as a group of keys, it said "...low" must be a table).
      {"type = \"log_uniform\"", "", "sweep.space.\"train.lr\".type is missing: give uniform"},
  };
  dir.write("notes.txt", "precious");  // an out_dir that is a file; a study that is a directory
  dir.write("studydir/x", "");
  const std::vector<Case> paths = {
      {"study = \"studies/lr.db\"", "study = \"studies/lr.db\"\nout_dir = \"notes.txt\"",
       "sweep.out_dir = '" + (dir / "notes.txt").string() + "' is a file, not a directory"},
      {"study = \"studies/lr.db\"", "study = \"studydir\"", "sweep.study = '" + (dir / "studydir").string() +
                                                              "' is a directory"},
  };
  for (const Case& c : paths) {
    const std::string message = cfg_error_with(dir, c.from, c.to);
    EXPECT_NE(message.find(c.expect), std::string::npos) << "got: " << message << "\nexpected: " << c.expect;
  }
  for (const Case& c : cases) {
    if (c.expect.empty()) {
      std::string text = kCfgExample;
      text.replace(text.find(c.from), c.from.size(), c.to);
      dir.write("run.toml", "");
      EXPECT_NO_THROW(parse_sweep_config(text, dir / "sweep.toml", {}, cfg_checks())) << c.to;
      continue;
    }
    const std::string message = cfg_error_with(dir, c.from, c.to);
    EXPECT_NE(message.find(c.expect), std::string::npos) << "got: " << message << "\nexpected: " << c.expect;
    EXPECT_EQ(message.rfind(file, 0), 0u) << "does not start with the file: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(SweepConfig, EmptySpaceAndUngriddableGridAreRefused) {
  EXPECT_NE(error_of<ConfigError>([] { parse_sweep_config("[sweep]\ntrials = 2\n", "s.toml", {}, {}); })
                .find("s.toml: sweep.space is empty"),
            std::string::npos);
  const std::string message = error_of<ConfigError>([] {
    parse_sweep_config("[sweep]\nsampler = \"grid\"\n[sweep.space.x]\ntype = \"uniform\"\nlow = 0\nhigh = 1\n", "s.toml", {}, {});
  });
  EXPECT_EQ(message.rfind("s.toml: ", 0), 0u) << message;
  EXPECT_NE(message.find("grid_points"), std::string::npos) << message;
}

}  // namespace
}  // namespace hwt::sweep
