#include "hwtrain/train/lr_range_test.h"

#include <algorithm>
#include <cmath>

#include "hwtrain/core/error.h"
#include "hwtrain/core/option_checks.h"
#include "hwtrain/train/trainer_options.h"

namespace hwt {

void LrRangeTestOptions::validate() const {
  check_positive("--start-lr", start_lr);
  if (!(end_lr > start_lr)) {
    option_range_error("--end-lr", option_text(end_lr), "must be greater than --start-lr = " + option_text(start_lr));
  }
  check_at_least("--steps", steps, kMinLrRangePoints);
  if (!(divergence_factor > 1)) option_range_error("divergence_factor", option_text(divergence_factor), "must be > 1");
  check_in_range("smoothing", smoothing, 0.0, 1.0, false);
}

double range_test_lr(const LrRangeTestOptions& o, int64_t step) {
  const double t = o.steps > 1 ? static_cast<double>(step) / static_cast<double>(o.steps - 1) : 0.0;
  return o.start_lr * std::pow(o.end_lr / o.start_lr, std::min(t, 1.0));
}

LrRangeTest::LrRangeTest(LrRangeTestOptions options) : options_(options) { options_.validate(); }

void LrRangeTest::on_train_begin(TrainerControl& t) {
  const double base = t.options().train.lr;
  if (!(base > 0)) throw ConfigError("lr range test: train.lr must be positive (it is the scale's base)");
  points_.clear();
  average_ = 0;
  diverged_ = false;
  t.set_lr_scale(range_test_lr(options_, 0) / base);
}

void LrRangeTest::on_step_end(TrainerControl& t, const StepMetrics& m) {
  const auto n = static_cast<int64_t>(points_.size());
  LrRangePoint p;
  p.lr = range_test_lr(options_, n);  // the rate this step ran with
  p.loss = m.loss;
  if (std::isfinite(m.loss)) {
    average_ = options_.smoothing * average_ + (1 - options_.smoothing) * m.loss;
    p.smoothed = average_ / (1 - std::pow(options_.smoothing, static_cast<double>(n + 1)));
  } else {
    p.smoothed = NAN;
  }
  points_.push_back(p);
  if (n == 0 || (std::isfinite(p.smoothed) && p.smoothed < best_)) best_ = p.smoothed;
  if (!std::isfinite(p.smoothed) || p.smoothed > options_.divergence_factor * best_) {
    diverged_ = true;
    t.request_stop("lr range test: the loss diverged at lr " + option_text(p.lr));
    return;
  }
  if (n + 1 >= options_.steps) {
    t.request_stop("lr range test: the ramp reached --end-lr");
    return;
  }
  t.set_lr_scale(range_test_lr(options_, n + 1) / t.options().train.lr);
}

size_t centred_half_window(size_t n) { return std::max<size_t>(2, n / 25); }

std::vector<double> centred_loss(const std::vector<LrRangePoint>& p) {
  const size_t half = centred_half_window(p.size());
  std::vector<double> out(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const size_t lo = i >= half ? i - half : 0, hi = std::min(p.size() - 1, i + half);
    double sum = 0;
    for (size_t k = lo; k <= hi; ++k) sum += p[k].loss;
    out[i] = sum / static_cast<double>(hi - lo + 1);
  }
  return out;
}

std::optional<LrSuggestion> suggest_lr(const std::vector<LrRangePoint>& points) {
  std::vector<LrRangePoint> finite;
  for (const auto& p : points) {
    if (std::isfinite(p.loss) && p.lr > 0) finite.push_back(p);
  }
  if (finite.size() < static_cast<size_t>(kMinLrRangePoints)) return std::nullopt;
  const size_t half = centred_half_window(finite.size());
  const std::vector<double> loss = centred_loss(finite);
  // The first points are the curve's noisy start and the last ones the divergence itself (fastai
  // skips 10 and 5); both would put the steepest slope where no learning rate should be read.
  const size_t skip_start = std::min<size_t>(10, finite.size() / 10), skip_end = std::min<size_t>(5, finite.size() / 10);
  const size_t lo = skip_start, hi = finite.size() - skip_end;  // [lo, hi)
  double steepest = 0;
  size_t best_i = lo, min_i = lo;
  for (size_t i = lo; i < hi; ++i) {
    if (loss[i] < loss[min_i]) min_i = i;
    if (i == lo || i + 1 == hi) continue;
    // Central difference per decade of learning rate.
    const double slope = (loss[i + 1] - loss[i - 1]) / (std::log10(finite[i + 1].lr) - std::log10(finite[i - 1].lr));
    if (slope < steepest) {
      steepest = slope;
      best_i = i;
    }
  }
  LrSuggestion s;
  s.steepest = finite[best_i].lr;
  s.min_loss_tenth = finite[min_i].lr / 10.0;
  s.how = "loss of " + std::to_string(finite.size()) + " steps averaged over +-" + std::to_string(half) +
          " steps, first " + std::to_string(skip_start) + " and last " + std::to_string(skip_end) + " skipped";
  return s;
}

}  // namespace hwt
