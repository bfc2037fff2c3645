// `hwtrain lr-find`: Leslie Smith's learning-rate range test (train/lr_range_test.h) on the
// configured model and data: a short run whose learning rate grows exponentially, printed as a
// table, plotted as lr_find.svg (loss against log10 lr) and saved as lr_find.json in its run
// directory, with the suggested learning rates.
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>

#include "hwtrain/cli/run_setup.h"
#include "hwtrain/cli/train_run.h"
#include "hwtrain/core/error.h"
#include "hwtrain/core/files.h"
#include "hwtrain/core/option_checks.h"
#include "hwtrain/dist/dist_env.h"
#include "hwtrain/obs/svg_plot.h"
#include "hwtrain/train/lr_range_test.h"

namespace hwt::cli {

namespace {

namespace fs = std::filesystem;

struct LrFindArgs {
  TrainArgs train;
  LrRangeTestOptions options;
};

std::string lr_plot(const std::vector<LrRangePoint>& points, const std::optional<LrSuggestion>& s) {
  PlotSpec spec;
  spec.title = "LR range test";
  spec.x_label = "log10 learning rate";
  spec.y_label = "training loss";
  PlotSeries raw{"loss", {}, {}, "#c7c7c7"}, smooth{"averaged loss (read for the suggestion)", {}, {}, "#1f77b4"};
  const std::vector<double> averaged = centred_loss(points);
  // The divergence would set the scale: losses above twice the first are left out of the plot.
  const double cap = points.empty() ? 0.0 : 2.0 * points.front().loss;
  for (size_t i = 0; i < points.size(); ++i) {
    raw.x.push_back(std::log10(points[i].lr));
    raw.y.push_back(points[i].loss <= cap ? points[i].loss : NAN);
    smooth.x.push_back(raw.x.back());
    smooth.y.push_back(averaged[i] <= cap ? averaged[i] : NAN);
  }
  spec.series = {raw, smooth};
  if (s) {
    PlotSeries mark{"suggested (steepest)", {std::log10(s->steepest)}, {}, "#d62728", true};
    for (size_t i = 0; i < points.size(); ++i) {
      if (points[i].lr >= s->steepest) {
        mark.y.push_back(averaged[i]);
        break;
      }
    }
    if (mark.y.size() == 1) spec.series.push_back(mark);
  }
  return svg_line_plot(spec);
}

void write_outputs(const fs::path& run_dir, const LrRangeTest& test, const std::optional<LrSuggestion>& s) {
  nlohmann::json j;
  j["points"] = nlohmann::json::array();
  for (const auto& p : test.points()) {
    j["points"].push_back({{"lr", p.lr}, {"loss", std::isfinite(p.loss) ? nlohmann::json(p.loss) : nullptr},
                           {"smoothed", std::isfinite(p.smoothed) ? nlohmann::json(p.smoothed) : nullptr}});
  }
  j["diverged"] = test.diverged();
  if (s) j["suggestion"] = {{"steepest", s->steepest}, {"min_loss_tenth", s->min_loss_tenth}, {"how", s->how}};
  write_file_atomic(run_dir / "lr_find.json", j.dump(1) + "\n");
  write_file_atomic(run_dir / "lr_find.svg", lr_plot(test.points(), s) + "\n");
}

int run_lr_find(LrFindArgs& a) {
  a.options.validate();
  TrainArgs t = a.train;
  // What the test needs wins over the user's --set: a constant rate this callback scales, no
  // evaluation, checkpoint, sample or time budget in the way.
  for (const std::string& o : std::vector<std::string>{"train.lr_schedule=constant", "train.warmup_steps=0", "train.min_lr=0", "train.lr=" + option_text(a.options.start_lr),
        "train.max_steps=" + std::to_string(a.options.steps), "train.eval_interval=0", "train.sample_tokens=0",
        "train.time_budget=0", "checkpoint.save_final=false", "checkpoint.interval=0",
        "checkpoint.every_minutes=0", "early_stopping.enabled=false", "lr_plateau.enabled=false", "log.report=false",
        "optimization.nonfinite_fallback_steps=0"}) {  // a diverging loss is what the test looks for
    t.config.overrides.push_back(o);
  }
  if (t.out.empty()) t.out = new_run_dir().string();
  auto test = std::make_shared<LrRangeTest>(a.options);
  t.extra_callbacks.push_back(test);
  const int rc = run_train(t);
  if (rc != 0 && rc < 128) return rc;  // an error; a run a signal cut short (128 + it) reports what it measured
  if (read_dist_env().rank != 0) return rc;  // launched: every rank saw the same (averaged) losses; one reports
  const auto suggestion = suggest_lr(test->points());
  write_outputs(t.out, *test, suggestion);
  std::cout << "step  lr          loss      smoothed\n";
  const size_t every = std::max<size_t>(1, test->points().size() / 20);
  for (size_t i = 0; i < test->points().size(); i += every) {
    const auto& p = test->points()[i];
    std::printf("%-5zu %-11.3g %-9.4f %.4f\n", i + 1, p.lr, p.loss, p.smoothed);
  }
  if (!suggestion) {
    size_t finite = 0;
    for (const auto& p : test->points()) finite += std::isfinite(p.loss) ? 1 : 0;
    std::cout << "too few finite steps to suggest a learning rate: " << finite << " of --steps "
              << a.options.steps << " had a finite loss, " << kMinLrRangePoints
              << " are needed; raise --steps or lower --start-lr\n";
    return rc != 0 ? rc : 1;
  }
  std::printf("suggested learning rate: %.3g (steepest descent of the loss); %.3g (a tenth of the "
              "minimum's)\n%s%s\nplot: %s\n",
              suggestion->steepest, suggestion->min_loss_tenth, suggestion->how.c_str(),
              test->diverged() ? "; the loss diverged before --end-lr" : "",
              (fs::path(t.out) / "lr_find.svg").string().c_str());
  return rc;
}

}  // namespace

Command add_lr_find(CLI::App& app) {
  auto a = std::make_shared<LrFindArgs>();
  CLI::App* cmd = app.add_subcommand("lr-find", "learning-rate range test: an exponential ramp of the learning "
                                                "rate, the loss curve, and a suggested rate");
  add_config_options(cmd, a->train.config);
  cmd->add_option("--out", a->train.out, "run directory (default: runs/<date-time>)");
  cmd->add_flag("--overwrite", a->train.overwrite, "let --out replace the run it holds");
  cmd->add_option("--start-lr", a->options.start_lr, "learning rate of the first step")->capture_default_str();
  cmd->add_option("--end-lr", a->options.end_lr, "learning rate of the last step")->capture_default_str();
  cmd->add_option("--steps", a->options.steps, "steps of the ramp (it stops early when the loss diverges)")
      ->capture_default_str();
  cmd->footer("Example:\n  hwtrain lr-find --set model.preset=char-small --steps 200\n"
              "  then: hwtrain train --set train.lr=<suggested>");
  return {cmd, [a] { return run_lr_find(*a); }};
}

}  // namespace hwt::cli
