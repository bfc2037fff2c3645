#include "hwtrain/obs/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/obs/log.h"

namespace hwt {

namespace {
bool known(double v) { return !std::isnan(v); }


int terminal_columns() {
  winsize ws{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 100;
}
}  // namespace

ProgressMode resolve_progress_mode(std::optional<ProgressMode> mode, bool stderr_is_terminal) {
  return mode.value_or(stderr_is_terminal ? ProgressMode::bar : ProgressMode::lines);
}

ProgressMode resolve_progress_mode(std::optional<ProgressMode> mode) {
  return resolve_progress_mode(mode, ::isatty(STDERR_FILENO) == 1);
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || std::isinf(seconds)) return "?";
  auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  }
  return buf;
}

std::string format_step_line(const StepMetrics& m, double eta_seconds) {
  std::string s = "step " + std::to_string(m.step);
  s += " | loss " + format_number("%.4f", m.loss);
  s += " | lr " + format_number("%.3e", m.lr);
  if (known(m.grad_norm)) s += " | grad_norm " + format_number("%.3f", m.grad_norm);
  s += " | tokens/s " + format_number("%.0f", m.tokens_per_second);
  if (known(m.mfu)) s += " | mfu " + format_number("%.1f", 100.0 * m.mfu) + "%";
  if (known(m.rss_bytes)) s += " | mem " + format_bytes(m.rss_bytes);
  if (known(m.device_allocated_bytes)) s += " | dev_mem " + format_bytes(m.device_allocated_bytes);
  if (known(m.step_seconds)) s += " | step_time " + format_number("%.3f", m.step_seconds) + "s";
  if (known(m.loss_scale)) s += " | loss_scale " + format_number("%g", m.loss_scale);
  if (m.skipped_steps > 0) s += " | skipped " + std::to_string(m.skipped_steps);
  if (eta_seconds >= 0) s += " | eta " + format_duration(eta_seconds);
  return s;
}

std::string format_eval_line(const EvalMetrics& m) {
  std::string s = "eval step " + std::to_string(m.step);
  s += " | val_loss " + format_number("%.4f", m.val_loss);
  s += " | val_perplexity " + format_number("%.2f", m.val_perplexity);
  return s;
}

std::string format_bar(const StepMetrics& m, int64_t max_steps, double eta_seconds, int columns) {
  constexpr int kBarWidth = 20;
  std::string s;
  if (max_steps > 0) {
    double frac = std::min(1.0, std::max(0.0, double(m.step) / double(max_steps)));
    int filled = static_cast<int>(frac * kBarWidth);
    s = "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "] " +
        std::to_string(m.step) + "/" + std::to_string(max_steps) + " " +
        format_number("%.0f", 100.0 * frac) + "% eta " + format_duration(eta_seconds);
  } else {
    s = "step " + std::to_string(m.step);
  }
  s += " | loss " + format_number("%.4f", m.loss) + " | lr " + format_number("%.2e", m.lr);
  if (known(m.tokens_per_second)) s += " | " + format_number("%.0f", m.tokens_per_second) + " tok/s";
  if (known(m.mfu)) s += " | mfu " + format_number("%.1f", 100.0 * m.mfu) + "%";
  if (known(m.device_allocated_bytes)) {
    s += " | dev " + format_bytes(m.device_allocated_bytes);
  } else if (known(m.rss_bytes)) {
    s += " | mem " + format_bytes(m.rss_bytes);
  }
  // One column short of the width: a line that wraps cannot be redrawn with \r.
  if (columns > 1 && static_cast<int>(s.size()) > columns - 1) s.resize(columns - 1);
  return s;
}

ProgressDisplay::ProgressDisplay(ProgressMode mode, int64_t max_steps, ProgressOutput out)
    : mode_(mode), max_steps_(max_steps), out_(std::move(out)) {
  if (!out_.line) out_.line = [](const std::string& s) { log_info("{}", s); };
  if (!out_.raw) {
    out_.raw = [](const std::string& s) {
      if (!is_log_rank()) return;
      std::fputs(s.c_str(), stderr);
      std::fflush(stderr);
    };
  }
}

double ProgressDisplay::now_seconds() const {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

double ProgressDisplay::eta_seconds(const StepMetrics& m) {
  const double t = known(m.elapsed_seconds) ? m.elapsed_seconds : now_seconds();
  if (first_step_ < 0) {
    first_step_ = m.step;
    first_time_ = t;
  }
  if (max_steps_ <= 0 || m.step <= first_step_) return -1;
  const double per_step = (t - first_time_) / double(m.step - first_step_);
  return per_step * double(std::max<int64_t>(0, max_steps_ - m.step));
}

void ProgressDisplay::on_step(const StepMetrics& m) {
  const double eta = eta_seconds(m);
  last_step_ = m;
  last_eta_ = eta;
  have_step_ = true;
  if (mode_ == ProgressMode::lines) {
    out_.line(format_step_line(m, eta));
    return;
  }
  const double now = now_seconds();
  if (now - last_redraw_ < out_.min_redraw_seconds && m.step != max_steps_) return;
  last_redraw_ = now;
  const int columns = out_.terminal_columns > 0 ? out_.terminal_columns : terminal_columns();
  out_.raw("\r" + format_bar(m, max_steps_, eta, columns) + "\033[K");
  bar_visible_ = true;
}

void ProgressDisplay::on_eval(const EvalMetrics& m) {
  if (bar_visible_) out_.raw("\r\033[K");  // the eval line replaces the bar, which follows it
  out_.line(format_eval_line(m));
  if (bar_visible_ && have_step_) {
    const int columns = out_.terminal_columns > 0 ? out_.terminal_columns : terminal_columns();
    out_.raw(format_bar(last_step_, max_steps_, last_eta_, columns) + "\033[K");
  }
}

void ProgressDisplay::finish() {
  if (!bar_visible_) return;
  out_.raw("\n");
  bar_visible_ = false;
}

}  // namespace hwt
