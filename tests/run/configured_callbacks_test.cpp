// The built-in callbacks a run's config asks for (run/configured_callbacks.h).
#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/metrics.h"
#include "hwtrain/run/configured_callbacks.h"

namespace hwt {
namespace {

TEST(ConfiguredCallbacks, BuildsOnlyTheEnabledOnesInOrder) {
  RunConfig c;
  auto names = [](const std::vector<std::shared_ptr<Callback>>& cbs) {
    std::vector<std::string> out;
    for (const auto& cb : cbs) out.push_back(cb->name());
    return out;
  };
  EXPECT_EQ(names(make_configured_callbacks(c)), (std::vector<std::string>{"interrupt"}));
  c.apply_toml(
      "[early_stopping]\nenabled = true\nmonitor = \"loss\"\npatience = 50\n"
      "[lr_plateau]\nenabled = true\nfactor = 0.2\n"
      "[lr_monitor]\nenabled = true\n"
      "[log]\nprofile_steps = \"3:4\"\n",
      "run.toml");
  EXPECT_EQ(c.early_stopping.patience, 50);
  EXPECT_EQ(c.lr_plateau.factor, 0.2);
  EXPECT_EQ(names(make_configured_callbacks(c)),
            (std::vector<std::string>{"interrupt", "early_stopping", "lr_plateau", "lr_monitor", "profiler"}));
}

TEST(ConfiguredCallbacks, UnknownMonitorListsTheAvailableMetrics) {
  RunConfig c;
  c.apply_override("early_stopping.enabled=true");
  c.apply_override("early_stopping.monitor=val_los");
  try {
    make_configured_callbacks(c);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("early_stopping.monitor"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'val_los'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("did you mean"), std::string::npos) << msg;
    for (const auto& name : available_metric_names()) EXPECT_NE(msg.find(name), std::string::npos) << name;
  }
  RunConfig k;
  k.apply_override("checkpoint.monitor=perplexity");
  EXPECT_THROW(make_configured_callbacks(k), ConfigError);
}

TEST(ConfiguredCallbacks, RejectsImpossibleCombinations) {
  RunConfig no_eval;
  no_eval.train.eval_interval = 0;
  no_eval.lr_plateau.enabled = true;  // monitors val_loss by default
  try {
    make_configured_callbacks(no_eval);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train.eval_interval"), std::string::npos) << e.what();
  }
  RunConfig floor;
  floor.lr_plateau.enabled = true;
  floor.lr_plateau.min_lr = floor.train.lr;
  EXPECT_THROW(make_configured_callbacks(floor), ConfigError);
  RunConfig range;
  range.log.profile_steps = "0:3";
  EXPECT_THROW(make_configured_callbacks(range), ConfigError);
  RunConfig mode;
  EXPECT_THROW(mode.apply_override("early_stopping.mode=maximum"), ConfigError);
}

// Each rank measures its own speed and memory: ranks monitoring them would stop, cut the learning
// rate or keep a best checkpoint apart (a ZeRO-3 rank restoring other masters than its peers).
TEST(ConfiguredCallbacks, ADistributedRunMonitorsOnlyWhatItsRanksShare) {
  for (const char* key : {"early_stopping", "lr_plateau"}) {
    RunConfig c;
    c.apply_override(std::string(key) + ".enabled=true");
    c.apply_override(std::string(key) + ".monitor=tokens_per_second");
    EXPECT_NO_THROW(make_configured_callbacks(c, 0, 1)) << key;
    try {
      make_configured_callbacks(c, 1, 2);
      FAIL() << key << ": expected a ConfigError";
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string(key) + ".monitor = 'tokens_per_second' is measured by each of the 2 processes"),
                std::string::npos) << msg;
    }
    c.apply_override(std::string(key) + ".monitor=loss");
    EXPECT_NO_THROW(make_configured_callbacks(c, 1, 2)) << key;
  }
  RunConfig k;
  k.apply_override("checkpoint.monitor=rss_bytes");
  k.apply_override("checkpoint.interval=10");
  EXPECT_THROW(make_configured_callbacks(k, 0, 4), ConfigError);
}

// A table that is off is still checked: its bad value is refused now, not when it is switched on.
TEST(ConfiguredCallbacks, ADisabledTablesRangesAreChecked) {
  for (const char* o : {"early_stopping.patience=0", "lr_plateau.factor=1.5", "lr_monitor.interval=-1"}) {
    RunConfig c;
    c.apply_override(o);
    try {
      c.validate();
      FAIL() << o << ": expected a ConfigError";
    } catch (const ConfigError& e) {
      const std::string key = std::string(o).substr(0, std::string(o).find('='));
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace hwt
