#include "hwtrain/run/sweep_binding.h"

#include <algorithm>
#include <memory>
#include <set>

#include "hwtrain/core/error.h"
#include "hwtrain/core/strings.h"
#include "hwtrain/data/byte_tokenizer.h"
#include "hwtrain/obs/metrics.h"
#include "hwtrain/run/run_bindings.h"

namespace hwt {

sweep::SweepKeyChecks sweep_key_checks() {
  auto keys = std::make_shared<std::set<std::string>>();
  const std::vector<std::string> all = RunConfig::all_keys();
  keys->insert(all.begin(), all.end());
  return {[keys](const std::string& k) { return keys->count(k) > 0; }, all, available_metric_names()};
}

void check_space_values(const sweep::SweepConfig& config, const RunConfig& base) {
  using sweep::ParamKind;
  for (const sweep::ParamSpec& p : config.space.params) {
    if (p.key == "optimization.intra_op_threads" || p.key == "log.progress") {  // set per trial, after the space's
      throw ConfigError(config.sweep_file.string() + ": sweep.space.\"" + p.key +
                        "\" cannot be searched: the sweep sets it for every trial (threads from the trials it runs "
                        "at once; sweep.parallel sets those)");
    }
    std::vector<std::string> values = p.choices;
    if (p.kind == ParamKind::kInt) {
      values = {sweep::to_override_value(static_cast<std::int64_t>(p.low)),
                sweep::to_override_value(static_cast<std::int64_t>(p.high))};
    } else if (p.kind != ParamKind::kChoice) {
      // The bounds, and a value between them with a fraction, as the sampler draws (bounds such as
      // 1 and 3 print as whole numbers, which a whole-number key would take).
      values = {sweep::to_override_value(p.low), sweep::to_override_value(p.high),
                sweep::to_override_value(p.low + 0.37 * (p.high - p.low))};
    }
    for (size_t i = 0; i < values.size(); ++i) {
      RunConfig probe = base;
      try {
        probe.apply_override(p.key + "=" + values[i]);
        probe.validate();
      } catch (const ConfigError& e) {
        const bool drawn = i == 2 && p.kind != ParamKind::kChoice && p.kind != ParamKind::kInt;
        throw ConfigError(config.sweep_file.string() + ": sweep.space.\"" + p.key + "\" value " + values[i] +
                          " is not valid for the run: " + e.what() +
                          (drawn ? " (this type draws fractional values; for a whole-number key use type = \"int\")"
                                 : ""));
      }
    }
  }
}

void check_objective_reported(const sweep::SweepConfig& config, const RunConfig& base) {
  std::set<std::string> searched;
  for (const sweep::ParamSpec& p : config.space.params) searched.insert(p.key);
  const std::string file = config.sweep_file.string() + ": ";
  const bool evaluated = is_eval_metric(config.objective);
  const int64_t every = base.train.eval_interval, last = base.train.max_steps;
  if (evaluated && !searched.count("train.eval_interval") && every <= 0) {
    throw ConfigError(file + "sweep.objective = '" + config.objective + "' is an evaluation metric, but the base " +
                      "config never evaluates (train.eval_interval = " + std::to_string(every) +
                      "); set train.eval_interval > 0 or choose a training metric such as loss");
  }
  if (config.at_step <= 0 || searched.count("train.max_steps")) return;
  if (last > 0 && config.at_step > last) {
    throw ConfigError(file + "sweep.at_step = " + std::to_string(config.at_step) + " is past the base config's " +
                      "train.max_steps = " + std::to_string(last) + ": no trial reaches it");
  }
  if (evaluated && !searched.count("train.eval_interval") && every > 0 && config.at_step % every != 0 &&
      config.at_step != last) {
    throw ConfigError(file + "sweep.at_step = " + std::to_string(config.at_step) + " evaluates no '" +
                      config.objective + "' (train.eval_interval = " + std::to_string(every) +
                      "): give a multiple of " + std::to_string(every) + " or the last step");
  }
}

std::string trial_visible_device(int gpu, const char* mask) {
  if (mask == nullptr || mask[0] == '\0') return std::to_string(gpu);
  std::vector<std::string> visible(1);
  for (const char* c = mask; *c != '\0'; ++c) {
    if (*c == ',') {
      visible.emplace_back();
    } else if (*c != ' ') {
      visible.back() += *c;
    }
  }
  return gpu >= 0 && gpu < static_cast<int>(visible.size()) ? visible[static_cast<size_t>(gpu)] : std::to_string(gpu);
}

namespace {

// The base config's planned peak on one GPU of `hw`, or nullopt with the reason in `note`.
std::optional<std::uint64_t> planned_trial_bytes(const HardwareProfile& hw, RunConfig base, std::string* note) {
  if (base.model.vocab_size == 0) {
    if (base.data.tokenizer != "byte") {
      *note = "a trial's GPU memory is unknown before its tokenizer is read (set model.vocab_size to plan it): "
              "one trial per GPU";
      return std::nullopt;
    }
    base.model.vocab_size = resolve_vocab_size(base.model, ByteTokenizer::kVocabSize);
  }
  try {
    const Plan plan = make_plan(hw, base, PlanContext{});
    *note = "a trial of the base config is planned at " + format_bytes(plan.predicted_peak_bytes) + " per GPU";
    return static_cast<std::uint64_t>(plan.predicted_peak_bytes);
  } catch (const Error& e) {
    *note = std::string("the base config could not be planned (") + e.what() + "): one trial per GPU";
    return std::nullopt;
  }
}

}  // namespace

sweep::ParallelismInputs sweep_parallelism_inputs(const HardwareProfile& hw, const RunConfig& base, int parallel,
                                                  int trials_left, std::string* note) {
  sweep::ParallelismInputs in;
  in.physical_cores = std::max(1, hw.cpu.num_physical_cores);
  for (const GpuInfo& g : hw.gpus) {
    if (!g.usable_by_torch) continue;
    ++in.num_gpus;
    const auto bytes = static_cast<std::uint64_t>(g.total_memory_bytes);
    in.gpu_memory_bytes = in.gpu_memory_bytes == 0 ? bytes : std::min(in.gpu_memory_bytes, bytes);
  }
  in.parallel = parallel;
  in.max_trials = std::max(1, trials_left);
  note->clear();
  if (in.num_gpus > 0 && base.train.device != "cpu") in.trial_gpu_bytes = planned_trial_bytes(hw, base, note);
  if (in.num_gpus > 0 && base.train.device == "cpu") in.num_gpus = 0;  // the trials train on the CPU
  return in;
}

}  // namespace hwt
