// LrRangeTest: Leslie Smith's learning-rate range test (Smith 2017, "Cyclical Learning Rates for
// Training Neural Networks", section 3.3; fastai's lr_find): the learning rate grows exponentially
// from start_lr to end_lr over `steps` optimizer steps while the training loss is recorded; the run
// stops early once the smoothed loss exceeds divergence_factor x its best. suggest_lr() then reads
// the curve, smoothed after the fact by a centred average (no lag): the learning rate where the loss
// falls fastest (per decade of learning rate), and a tenth of the one at its minimum (fastai's two
// suggestions). The EMA (`smoothed`) is what the divergence check and the plot use.
// The trainer must run a constant schedule at train.lr with no warmup: this callback steers the
// learning rate through TrainerControl::set_lr_scale. `hwtrain lr-find` sets that up.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hwtrain/train/callback.h"

namespace hwt {

struct LrRangeTestOptions {
  double start_lr = 1e-7;         // far below any useful rate: the curve's flat start
  double end_lr = 10.0;           // far above: training diverges before it is reached
  int64_t steps = 100;            // the ramp's length; fastai's default
  double divergence_factor = 4.0;  // stop once the smoothed loss exceeds this x its best (fastai: 4)
  double smoothing = 0.98;        // EMA factor of the smoothed loss, with bias correction (fastai)
  void validate() const;          // ConfigError naming the option
};

struct LrRangePoint {
  double lr = 0;
  double loss = 0;
  double smoothed = 0;
};

struct LrSuggestion {
  double steepest = 0;          // lr where the smoothed loss falls fastest per decade
  double min_loss_tenth = 0;    // a tenth of the lr at the smoothed loss's minimum
  std::string how;              // what was skipped and why, for the printout
};

// The learning rate of step `step` (0-based) of the ramp.
double range_test_lr(const LrRangeTestOptions& options, int64_t step);

// The loss averaged over +-centred_half_window(n) points (fewer at the ends): after the fact the
// curve can be smoothed without the EMA's lag, which over a 100-step ramp would move a reading by
// most of a decade. Its price: a curve rising faster on one side of its minimum reads the minimum
// up to a window's width (about a third of a decade on a 100-step, 8-decade ramp) early.
size_t centred_half_window(size_t n);
std::vector<double> centred_loss(const std::vector<LrRangePoint>& points);

// The fewest finite points suggest_lr reads, and so the fewest --steps.
inline constexpr int64_t kMinLrRangePoints = 16;

// From the recorded points, read on centred_loss(): nullopt when fewer than kMinLrRangePoints
// finite points remain.
std::optional<LrSuggestion> suggest_lr(const std::vector<LrRangePoint>& points);

class LrRangeTest : public Callback {
 public:
  explicit LrRangeTest(LrRangeTestOptions options);
  std::string name() const override { return "lr_range_test"; }
  void on_train_begin(TrainerControl& t) override;
  void on_step_end(TrainerControl& t, const StepMetrics& m) override;
  const std::vector<LrRangePoint>& points() const { return points_; }
  bool diverged() const { return diverged_; }

 private:
  LrRangeTestOptions options_;
  std::vector<LrRangePoint> points_;
  double average_ = 0;
  double best_ = 0;
  bool diverged_ = false;
};

}  // namespace hwt
