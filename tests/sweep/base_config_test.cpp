// The base config a study records (sweep/base_config.h): comments and layout do not count, a changed,
// added or removed setting is named.
#include "hwtrain/sweep/base_config.h"

#include <gtest/gtest.h>

#include "hwtrain/core/error.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace hwt::sweep {
namespace {

TEST(BaseConfig, CommentsAndLayoutDoNotCountSettingsDo) {
  hwt::testing::TempDir dir;
  const auto a = dir.write("a.toml", "# lr from the paper\n[train]\nlr = 0.001  # small\nmax_steps = 100\n");
  const auto b = dir.write("b.toml", "[train]\nmax_steps = 100\n\n\nlr = 1e-3\n");
  EXPECT_EQ(recorded_base_config(a), recorded_base_config(b));
  EXPECT_EQ(recorded_base_config(""), "");
  const std::string recorded = recorded_base_config(a);
  EXPECT_EQ(first_base_difference(recorded, recorded), "");
  const auto c = dir.write("c.toml", "[train]\nlr = 0.002\nmax_steps = 100\n");
  EXPECT_EQ(first_base_difference(recorded, recorded_base_config(c)),
            "train.lr = 0.001 in the study, 0.002 now");
  EXPECT_EQ(first_base_difference(recorded, "[train]\nmax_steps = 100\n"), "train.lr = 0.001 in the study, unset now");
  EXPECT_EQ(first_base_difference("", "[model]\nn_layer = 4\n"), "model.n_layer unset in the study, 4 now");
  // Keys no trial reads from the base (the space's, those the sweep sets per trial) are not recorded.
  const auto d = dir.write("d.toml", "[train]\nmax_steps = 100\n");
  EXPECT_EQ(recorded_base_config(c, {"train.lr", "log.progress", "seed"}), recorded_base_config(d));
  const auto bad = dir.write("bad.toml", "[train\n");
  EXPECT_NE(hwt::testing::error_of<ConfigError>([&] { recorded_base_config(bad); }).find(bad.string() + ":1"),
            std::string::npos);
}

}  // namespace
}  // namespace hwt::sweep
