// Metric names and lookups used by callbacks' `monitor`.
#include <gtest/gtest.h>

#include <algorithm>

#include "hwtrain/core/error.h"
#include "hwtrain/obs/metrics.h"

namespace hwt {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(Metrics, AvailableNames) {
  auto names = available_metric_names();
  for (const char* n : {"loss", "val_loss", "val_perplexity", "lr", "grad_norm",
                        "tokens_per_second", "mfu", "rss_bytes", "skipped_steps"}) {
    EXPECT_TRUE(contains(names, n)) << n;
  }
  EXPECT_FALSE(contains(names, "step"));
  EXPECT_TRUE(is_eval_metric("val_loss"));
  EXPECT_FALSE(is_eval_metric("loss"));
  for (const char* n : {"tokens_per_second", "mfu", "step_seconds", "comm_seconds", "rss_bytes", "device_peak_bytes"}) {
    EXPECT_TRUE(is_rank_local_metric(n)) << n;
  }
  for (const char* n : {"loss", "lr", "grad_norm", "loss_scale", "skipped_steps", "val_loss", "val_perplexity"}) {
    EXPECT_FALSE(is_rank_local_metric(n)) << n;
  }
}

TEST(Metrics, ValueLookup) {
  StepMetrics m;
  m.loss = 2.5;
  m.skipped_steps = 3;
  EXPECT_EQ(metric_value("loss", m), 2.5);
  EXPECT_EQ(metric_value("skipped_steps", m), 3.0);
  EXPECT_EQ(metric_value("grad_norm", m), std::nullopt);  // unknown (NaN)
  EXPECT_EQ(metric_value("tokens_seen", m), std::nullopt);  // unknown (-1)
  EXPECT_EQ(metric_value("val_loss", m), std::nullopt);  // an eval metric
  EvalMetrics e;
  e.val_loss = 1.25;
  EXPECT_EQ(metric_value("val_loss", e), 1.25);
  EXPECT_EQ(metric_value("loss", e), std::nullopt);
}

TEST(Metrics, UnknownNameIsAConfigErrorListingTheAvailableOnes) {
  StepMetrics m;
  EXPECT_THROW(metric_value("vall_loss", m), ConfigError);
  try {
    check_metric_name("vall_loss", "callbacks.early_stopping.monitor");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("callbacks.early_stopping.monitor"), std::string::npos) << msg;
    EXPECT_NE(msg.find("did you mean 'val_loss'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tokens_per_second"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(check_metric_name("val_perplexity", "k"));
}

}  // namespace
}  // namespace hwt
