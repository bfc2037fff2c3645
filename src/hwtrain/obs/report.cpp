// The HTML side of the report: final metrics table, plots, hardware, plan and config sections.
#include "hwtrain/obs/report.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <optional>

#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/obs/progress.h"
#include "hwtrain/obs/svg_plot.h"

namespace hwt {

namespace {
const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr const char* kNotRecorded = "not recorded";

const char* kCss = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
       max-width: 1180px; margin: 24px auto; padding: 0 16px; background: #fafafa; }
h1 { font-size: 24px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 28px;
     border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta { color: #666; margin-top: 0; } .note { background: #fff6d5; border: 1px solid #e8d48b;
     padding: 6px 10px; border-radius: 4px; }
.plots { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 14px; }
figure { margin: 0; background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 4px; }
svg.plot { width: 100%; height: auto; display: block; font-family: inherit; }
svg.plot .title { font-size: 14px; font-weight: 600; fill: #222; }
svg.plot .tick { font-size: 11px; fill: #555; } svg.plot .label { font-size: 12px; fill: #333; }
svg.plot .legend { font-size: 12px; fill: #333; } svg.plot .nodata { font-size: 14px; fill: #888; }
svg.plot .grid { stroke: #e8e8e8; stroke-width: 1; } svg.plot .axis { stroke: #444; stroke-width: 1; }
table { border-collapse: collapse; background: #fff; } th, td { border: 1px solid #ddd;
     padding: 4px 10px; text-align: left; vertical-align: top; } th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #fff; border: 1px solid #ddd; padding: 10px; overflow-x: auto; font-size: 12px; }
.missing { color: #888; font-style: italic; }
@media (max-width: 800px) { .plots { grid-template-columns: minmax(0, 1fr); } }
)";

using StepField = double StepMetrics::*;

std::vector<double> step_xs(const std::vector<StepMetrics>& steps) {
  std::vector<double> xs;
  for (const auto& m : steps) xs.push_back(static_cast<double>(m.step));
  return xs;
}

std::vector<double> column(const std::vector<StepMetrics>& steps, StepField f, double scale = 1) {
  std::vector<double> ys;
  for (const auto& m : steps) ys.push_back(m.*f * scale);
  return ys;
}

std::vector<double> known_values(const std::vector<StepMetrics>& steps, StepField f) {
  std::vector<double> v;
  for (const auto& m : steps) {
    if (std::isfinite(m.*f)) v.push_back(m.*f);
  }
  return v;
}

// Median over logged steps, leaving out the first when there are several: it carries warm-up
// (allocator growth, kernel selection) that is not the run's steady state.
std::optional<double> steady_median(const std::vector<StepMetrics>& steps, StepField f) {
  std::vector<StepMetrics> rest(steps.size() > 2 ? steps.begin() + 1 : steps.begin(), steps.end());
  auto v = known_values(rest, f);
  if (v.empty()) return std::nullopt;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

std::optional<double> max_value(const std::vector<StepMetrics>& steps, StepField f) {
  auto v = known_values(steps, f);
  if (v.empty()) return std::nullopt;
  return *std::max_element(v.begin(), v.end());
}

std::optional<StepMetrics> last_with(const std::vector<StepMetrics>& steps, StepField f) {
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (std::isfinite((*it).*f)) return *it;
  }
  return std::nullopt;
}

PlotSeries series(std::string name, std::vector<double> x, std::vector<double> y, int color) {
  PlotSeries s;
  s.name = std::move(name);
  s.x = std::move(x);
  s.y = std::move(y);
  s.color = kPalette[color % 8];
  return s;
}

PlotSpec plot_spec(std::string title, std::string y_label) {
  PlotSpec p;
  p.title = std::move(title);
  p.y_label = std::move(y_label);
  return p;
}

bool any_known(const std::vector<StepMetrics>& steps, std::initializer_list<StepField> fields) {
  for (auto f : fields) {
    if (!known_values(steps, f).empty()) return true;
  }
  return false;
}

// Process RSS and the device's allocated, reserved and peak bytes, in MiB or GiB.
PlotSpec memory_plot(const std::vector<StepMetrics>& st, const std::vector<double>& xs) {
  const StepField mem_fields[] = {&StepMetrics::rss_bytes, &StepMetrics::device_allocated_bytes,
                                  &StepMetrics::device_reserved_bytes,
                                  &StepMetrics::device_peak_bytes};
  const char* mem_names[] = {"process RSS", "device allocated", "device reserved", "device peak"};
  double mem_max = 0;
  for (auto f : mem_fields) mem_max = std::max(mem_max, max_value(st, f).value_or(0));
  const bool gib = mem_max >= 1024.0 * 1024 * 1024;
  PlotSpec mem = plot_spec("Memory", gib ? "GiB" : "MiB");
  for (int i = 0; i < 4; ++i) {
    const double scale = 1.0 / (gib ? 1024.0 * 1024 * 1024 : 1024.0 * 1024);
    mem.series.push_back(series(mem_names[i], xs, column(st, mem_fields[i], scale), i));
  }
  mem.y_from_zero = true;
  return mem;
}

// The monitor's process CPU and each GPU's utilization; nullopt without monitor samples.
std::optional<PlotSpec> utilization_plot(const std::vector<MonitorSample>& monitor) {
  PlotSpec util = plot_spec("Hardware utilization (monitor)", "percent");
  util.y_from_zero = true;
  PlotSeries cpu = series("process CPU (100 = 1 core)", {}, {}, 0);
  std::vector<PlotSeries> gpus;
  for (const auto& s : monitor) {
    if (s.step < 0) continue;
    cpu.x.push_back(static_cast<double>(s.step));
    cpu.y.push_back(s.process_cpu_percent);
    for (const auto& g : s.gpus) {
      while (static_cast<int>(gpus.size()) <= g.index) {
        gpus.push_back(series("GPU " + std::to_string(gpus.size()), {}, {}, int(gpus.size()) + 1));
      }
      gpus[g.index].x.push_back(static_cast<double>(s.step));
      gpus[g.index].y.push_back(g.utilization_percent);
    }
  }
  if (cpu.x.empty()) return std::nullopt;
  util.series.push_back(cpu);
  for (auto& g : gpus) util.series.push_back(g);
  return util;
}

std::vector<PlotSpec> build_plots(const ReportInputs& in) {
  const auto& st = in.steps;
  const auto xs = step_xs(st);
  std::vector<PlotSpec> plots;

  PlotSpec loss = plot_spec("Loss", "loss");
  loss.series.push_back(series("train loss", xs, column(st, &StepMetrics::loss), 0));
  PlotSeries val = series("validation loss", {}, {}, 1);
  val.markers = true;
  for (const auto& e : in.evals) {
    val.x.push_back(static_cast<double>(e.step));
    val.y.push_back(e.val_loss);
  }
  loss.series.push_back(val);
  plots.push_back(loss);

  if (any_known(st, {&StepMetrics::lr})) {
    PlotSpec lr = plot_spec("Learning rate", "learning rate");
    lr.series.push_back(series("lr", xs, column(st, &StepMetrics::lr), 2));
    lr.y_from_zero = true;
    plots.push_back(lr);
  }

  PlotSpec tput = plot_spec("Throughput", "tokens / s");
  tput.series.push_back(series("tokens/s", xs, column(st, &StepMetrics::tokens_per_second), 0));
  tput.y_from_zero = true;
  plots.push_back(tput);

  PlotSpec mfu = plot_spec("Model FLOPs utilization", "MFU (%)");
  mfu.series.push_back(series("MFU", xs, column(st, &StepMetrics::mfu, 100.0), 3));
  mfu.y_from_zero = true;
  plots.push_back(mfu);

  plots.push_back(memory_plot(st, xs));

  const StepField time_fields[] = {&StepMetrics::step_seconds, &StepMetrics::data_wait_seconds,
                                   &StepMetrics::forward_seconds, &StepMetrics::backward_seconds,
                                   &StepMetrics::optimizer_seconds, &StepMetrics::comm_seconds};
  const char* time_names[] = {"step", "data wait", "forward", "backward", "optimizer", "comm"};
  if (any_known(st, {time_fields[0], time_fields[1], time_fields[2], time_fields[3],
                     time_fields[4], time_fields[5]})) {
    PlotSpec time = plot_spec("Step time", "seconds");
    for (int i = 0; i < 6; ++i) {
      time.series.push_back(series(time_names[i], xs, column(st, time_fields[i]), i));
    }
    time.y_from_zero = true;
    plots.push_back(time);
  }

  if (auto util = utilization_plot(in.monitor)) plots.push_back(*util);
  return plots;
}

void add_row(std::string& o, const std::string& name, const std::optional<std::string>& value) {
  o += "<tr><th>" + xml_escape(name) + "</th>";
  if (value) {
    o += "<td class=\"num\">" + xml_escape(*value) + "</td></tr>\n";
  } else {
    o += std::string("<td class=\"missing\">") + kNotRecorded + "</td></tr>\n";
  }
}

std::string final_metrics_table(const ReportInputs& in) {
  const auto& st = in.steps;
  auto opt = [](std::optional<double> v, const char* format, double scale = 1) {
    return v ? std::optional<std::string>(format_number(format, *v * scale)) : std::nullopt;
  };
  auto bytes = [](std::optional<double> v) {
    return v ? std::optional<std::string>(format_bytes(*v)) : std::nullopt;
  };
  std::string o = "<table>\n";
  add_row(o, "final step", st.empty() ? std::nullopt
                                      : std::optional<std::string>(std::to_string(st.back().step)));
  auto loss = last_with(st, &StepMetrics::loss);
  add_row(o, "final training loss",
          loss ? std::optional<std::string>(format_number("%.4f", loss->loss) + " (step " +
                                            std::to_string(loss->step) + ")")
               : std::nullopt);
  std::optional<EvalMetrics> last_eval, best_eval;
  for (const auto& e : in.evals) {
    if (!std::isfinite(e.val_loss)) continue;
    last_eval = e;
    if (!best_eval || e.val_loss < best_eval->val_loss) best_eval = e;
  }
  auto eval_text = [](const std::optional<EvalMetrics>& e) -> std::optional<std::string> {
    if (!e) return std::nullopt;
    return format_number("%.4f", e->val_loss) + " (perplexity " + format_number("%.2f", e->val_perplexity) +
           ", step " + std::to_string(e->step) + ")";
  };
  add_row(o, "final validation loss", eval_text(last_eval));
  add_row(o, "best validation loss", eval_text(best_eval));
  auto tokens = st.empty() || st.back().tokens_seen < 0
                    ? std::nullopt
                    : std::optional<std::string>(std::to_string(st.back().tokens_seen));
  add_row(o, "tokens seen", tokens);
  auto elapsed = last_with(st, &StepMetrics::elapsed_seconds);
  add_row(o, "training time",
          elapsed ? std::optional<std::string>(format_duration(elapsed->elapsed_seconds))
                  : std::nullopt);
  add_row(o, "median tokens/s", opt(steady_median(st, &StepMetrics::tokens_per_second), "%.0f"));
  add_row(o, "median MFU", opt(steady_median(st, &StepMetrics::mfu), "%.1f%%", 100.0));
  add_row(o, "median step time", opt(steady_median(st, &StepMetrics::step_seconds), "%.3f s"));
  add_row(o, "peak process RSS", bytes(max_value(st, &StepMetrics::rss_bytes)));
  auto dev_peak = max_value(st, &StepMetrics::device_peak_bytes);
  if (!dev_peak) dev_peak = max_value(st, &StepMetrics::device_allocated_bytes);
  add_row(o, "peak device memory", bytes(dev_peak));
  auto lr = last_with(st, &StepMetrics::lr);
  add_row(o, "final learning rate", lr ? opt(lr->lr, "%.3e") : std::nullopt);
  auto scale = last_with(st, &StepMetrics::loss_scale);
  add_row(o, "final loss scale", scale ? opt(scale->loss_scale, "%g") : std::nullopt);
  add_row(o, "skipped steps", st.empty() || st.back().skipped_steps < 0
                                  ? std::nullopt
                                  : std::optional<std::string>(
                                        std::to_string(st.back().skipped_steps)));
  return o + "</table>\n";
}

std::string pre_or_missing(const std::string& text) {
  if (text.empty()) return std::string("<p class=\"missing\">") + kNotRecorded + "</p>\n";
  return "<pre>" + xml_escape(text) + "</pre>\n";
}

std::string plan_table(const std::vector<PlanRow>& plan) {
  if (plan.empty()) return std::string("<p class=\"missing\">") + kNotRecorded + "</p>\n";
  std::string o = "<table>\n<tr><th>decision</th><th>value</th><th>reason</th></tr>\n";
  for (const auto& r : plan) {
    o += "<tr><td>" + xml_escape(r.decision) + "</td><td>" + xml_escape(r.value) + "</td><td>" +
         xml_escape(r.reason) + "</td></tr>\n";
  }
  return o + "</table>\n";
}

std::string now_text() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&t));
  return buf;
}
}  // namespace

std::string html_page(const std::string& title, const std::string& body) {
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += "<title>hwtrain report: " + xml_escape(title) + "</title>\n";
  o += std::string("<style>") + kCss + "</style>\n</head>\n<body>\n";
  return o + body + "</body>\n</html>\n";
}

std::string generated_line(const std::string& extra) {
  std::string o = "<p class=\"meta\">generated " + xml_escape(now_text()) + " by hwtrain";
#ifdef HWTRAIN_VERSION
  o += " " HWTRAIN_VERSION;
#endif
  return o + (extra.empty() ? "" : " &middot; " + extra) + "</p>\n";
}

namespace {

std::string report_body(const ReportInputs& in) {
  std::string o = "<h1>Training report: " + xml_escape(in.title) + "</h1>\n";
  o += generated_line(std::to_string(in.steps.size()) + " logged steps, " + std::to_string(in.evals.size()) +
                      " evaluations");
  for (const auto& n : in.notes) o += "<p class=\"note\">" + xml_escape(n) + "</p>\n";

  o += "<h2>Final metrics</h2>\n" + final_metrics_table(in);
  o += "<h2>Plots</h2>\n<div class=\"plots\">\n";
  for (const auto& p : build_plots(in)) o += "<figure>\n" + svg_line_plot(p) + "</figure>\n";
  o += "</div>\n";
  o += "<h2>Hardware</h2>\n" + pre_or_missing(in.hardware_summary);
  o += "<h2>Plan</h2>\n" + plan_table(in.plan);
  o += "<h2>Configuration</h2>\n" + pre_or_missing(in.config_text);
  return o;
}

}  // namespace

std::string render_report_html(const ReportInputs& in) { return html_page(in.title, report_body(in)); }

void write_report(const fs::path& run_dir, const ReportInputs& in) {
  write_file_atomic(run_dir / kReportFileName, render_report_html(in));
}

}  // namespace hwt
