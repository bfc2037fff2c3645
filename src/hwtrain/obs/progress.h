// ProgressDisplay: what a person watching the run sees. On a terminal, one line redrawn in place
// with \r (step/max, ETA, loss, lr, tokens/s, MFU, memory); otherwise one plain line per logged
// step in a parseable form:
//   step 120 | loss 3.4521 | lr 3.000e-04 | grad_norm 0.812 | tokens/s 6340 | mfu 41.2% |
//   mem 1.2 GiB | dev_mem 3.4 GiB | step_time 0.412s | eta 33m20s
// ("step", "loss", "lr" and "tokens/s" are always present; other unknown values are left out)
// and, for each evaluation, a line of its own: "eval step 500 | val_loss 3.1234 |
// val_perplexity 22.75". It is a MetricSink, so the MetricsRecorder can drive it. Output goes
// through writers the caller may replace (tests capture them); by default lines go to the logger
// and the bar to stderr, on the logging rank only.
#pragma once
#include <functional>
#include <string>

#include "hwtrain/obs/metrics.h"
#include "hwtrain/obs/obs_config.h"

namespace hwt {

// log.progress: the mode set, or when auto (empty) a bar when `stderr_is_terminal`, lines otherwise.
ProgressMode resolve_progress_mode(std::optional<ProgressMode> mode, bool stderr_is_terminal);
// Resolves log.progress against isatty(stderr).
ProgressMode resolve_progress_mode(std::optional<ProgressMode> mode);

struct ProgressOutput {
  std::function<void(const std::string&)> line;  // a whole line, no trailing newline
  std::function<void(const std::string&)> raw;  // bar redraws: bytes written as they are
  int terminal_columns = 0;                      // bar width limit; 0 = ask the terminal
  double min_redraw_seconds = 0.1;               // bar redraws at most this often
};

class ProgressDisplay : public MetricSink {
 public:
  // `max_steps` <= 0 when unknown (no ETA, no bar fill). Writers left empty get the defaults.
  ProgressDisplay(ProgressMode mode, int64_t max_steps, ProgressOutput out = {});
  ~ProgressDisplay() override { finish(); }

  void on_step(const StepMetrics& m) override;
  void on_eval(const EvalMetrics& m) override;
  void flush() override {}
  // Ends the bar's line so that later output starts on a fresh line.
  void finish();

  ProgressMode mode() const { return mode_; }

 private:
  double eta_seconds(const StepMetrics& m);
  double now_seconds() const;

  ProgressMode mode_;
  int64_t max_steps_;
  ProgressOutput out_;
  bool bar_visible_ = false;
  double last_redraw_ = -1e300;
  StepMetrics last_step_;
  double last_eta_ = -1;
  bool have_step_ = false;
  int64_t first_step_ = -1;
  double first_time_ = 0;
};

std::string format_step_line(const StepMetrics& m, double eta_seconds);
std::string format_eval_line(const EvalMetrics& m);
// The bar text (no \r), at most `columns` characters.
std::string format_bar(const StepMetrics& m, int64_t max_steps, double eta_seconds, int columns);
// "45s", "12m05s", "3h02m", "2d04h"; "?" for NaN or negative.
std::string format_duration(double seconds);

}  // namespace hwt
