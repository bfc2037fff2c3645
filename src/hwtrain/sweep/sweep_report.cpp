#include "hwtrain/sweep/sweep_report.h"

#include <cmath>
#include <limits>

#include "hwtrain/core/files.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/obs/report.h"
#include "hwtrain/obs/svg_plot.h"
#include "hwtrain/sweep/param_importance.h"

namespace hwt::sweep {

namespace {

// The objective as the user reads it (values are stored minimized: a max objective negated).
double shown(const SweepReportInputs& in, double stored) { return in.direction == Direction::kMax ? -stored : stored; }

bool completed(const Trial& t) { return t.state == TrialState::kComplete && t.value && std::isfinite(*t.value); }

std::string history_plot(const SweepReportInputs& in) {
  PlotSpec spec;
  spec.title = "Optimization history";
  spec.x_label = "trial";
  spec.y_label = in.objective;
  PlotSeries each{"trial", {}, {}, "#1f77b4"}, best{"best so far", {}, {}, "#d62728"};
  each.line = false;
  double best_stored = std::numeric_limits<double>::infinity();
  for (const Trial& t : in.trials) {
    if (!completed(t)) continue;
    best_stored = std::min(best_stored, *t.value);
    each.x.push_back(static_cast<double>(t.number));
    each.y.push_back(shown(in, *t.value));
    best.x.push_back(static_cast<double>(t.number));
    best.y.push_back(shown(in, best_stored));
  }
  spec.series = {each, best};
  return svg_line_plot(spec);
}

// The objective against one parameter: log10 of a log range, a choice's index (its labels in the
// x label).
std::string slice_plot(const SweepReportInputs& in, const ParamSpec& p) {
  PlotSpec spec;
  spec.title = "Slice: " + p.key;
  const bool log = p.kind == ParamKind::kLogUniform || (p.kind == ParamKind::kInt && p.log);
  spec.x_label = log ? "log10 " + p.key : p.key;
  if (p.kind == ParamKind::kChoice) {
    std::vector<std::string> labels;
    for (size_t i = 0; i < p.choices.size(); ++i) labels.push_back(std::to_string(i) + " = " + p.choices[i]);
    spec.x_label = p.key + " (" + join(labels) + ")";
  }
  spec.y_label = in.objective;
  PlotSeries points{in.objective, {}, {}, "#1f77b4"};
  points.line = false;
  for (const Trial& t : in.trials) {
    if (!completed(t) || !t.params.count(p.key)) continue;
    const ParamValue& v = t.params.at(p.key);
    double x = NAN;
    if (const auto* d = std::get_if<double>(&v)) x = *d;
    if (const auto* i = std::get_if<std::int64_t>(&v)) x = static_cast<double>(*i);
    if (const auto* s = std::get_if<std::string>(&v)) {
      for (size_t i = 0; i < p.choices.size(); ++i) {
        if (p.choices[i] == *s) x = static_cast<double>(i);
      }
    }
    points.x.push_back(log && x > 0 ? std::log10(x) : x);
    points.y.push_back(shown(in, *t.value));
  }
  spec.series = {points};
  return svg_line_plot(spec);
}

std::string importance_table(const SweepReportInputs& in) {
  const auto importance = param_importance(in.space, in.trials);
  if (importance.empty()) return "<p class=\"note\">fewer than 3 completed trials: no importance yet</p>\n";
  std::string o = "<table>\n<tr><th>parameter</th><th>measure</th><th>value</th><th>share</th></tr>\n";
  for (const auto& i : importance) {
    o += "<tr><td>" + xml_escape(i.key) + "</td><td>" + i.measure + "</td><td>" + format_number("%.3f", i.value) +
         "</td><td>" + format_number("%.0f%%", 100.0 * i.share) + "</td></tr>\n";
  }
  return o + "</table>\n<p class=\"note\">rho^2: squared Spearman rank correlation of a range parameter with " +
         xml_escape(in.objective) + " (a monotone effect; an optimum inside the range scores low: see its slice " +
         "plot); eta^2: share of the objective's variance between a choice's values. Not fANOVA: a few tens of " +
         "trials are too few to fit its forest.</p>\n";
}

}  // namespace

std::string render_sweep_report(const SweepReportInputs& in) {
  int complete = 0, failed = 0, pruned = 0;
  const Trial* best = nullptr;
  for (const Trial& t : in.trials) {
    complete += completed(t);
    failed += t.state == TrialState::kFailed;
    pruned += t.state == TrialState::kPruned;
    if (completed(t) && (!best || *t.value < *best->value)) best = &t;
  }
  std::string o = "<h1>Sweep report: " + xml_escape(in.study) + "</h1>\n";
  o += generated_line(std::to_string(in.trials.size()) + " trials: " + std::to_string(complete) + " complete, " +
                      std::to_string(pruned) + " pruned, " + std::to_string(failed) + " failed");
  o += "<h2>Best trial</h2>\n";
  if (best) {
    o += "<p>trial " + std::to_string(best->number) + ": " + xml_escape(in.objective) + " = " +
         format_number("%.6g", shown(in, *best->value)) + "</p>\n<pre>";
    for (const auto& [key, value] : best->params) o += xml_escape(key + " = " + to_override_value(value)) + "\n";
    o += "</pre>\n";
  } else {
    o += "<p class=\"note\">no completed trial yet</p>\n";
  }
  o += "<h2>Plots</h2>\n<div class=\"plots\">\n<figure>\n" + history_plot(in) + "</figure>\n";
  for (const ParamSpec& p : in.space.params) o += "<figure>\n" + slice_plot(in, p) + "</figure>\n";
  o += "</div>\n<h2>Parameter importance</h2>\n" + importance_table(in);
  o += "<h2>Trials</h2>\n<pre>" + xml_escape(in.trials_table) + "</pre>\n";
  return html_page("sweep " + in.study, o);
}

void write_sweep_report(const std::filesystem::path& path, const SweepReportInputs& in) {
  write_file_atomic(path, render_sweep_report(in));
}

}  // namespace hwt::sweep
