// The pieces a sweep file names, built from its SweepConfig: the sampler, the pruner (or none) and
// the StudyInfo that ties a study file to this sweep's objective, direction and space.
// It does not open the study or run anything: see study_store.h and sweep_runner.h.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "hwtrain/sweep/pruner.h"
#include "hwtrain/sweep/sampler.h"
#include "hwtrain/sweep/study_store.h"
#include "hwtrain/sweep/sweep_config.h"

namespace hwt::sweep {

// GridSampler, RandomSampler or TpeSampler(config.tpe), as config.sampler says.
std::unique_ptr<Sampler> make_sampler(const SweepConfig& config);

// MedianPruner(config.median), AshaPruner(config.asha), or nullptr for pruner = "none".
std::unique_ptr<Pruner> make_pruner(const SweepConfig& config);

// name: the study file's stem (renaming the sweep file keeps its study); space_fingerprint:
// fingerprint(config.space); direction as configured; objective "val_loss", or "val_loss@500" with
// at_step = 500; base_config: recorded_base_config (reads the file) without the space's keys and
// `set_per_trial`, the keys the trial command sets for every trial.
StudyInfo make_study_info(const SweepConfig& config, const std::vector<std::string>& set_per_trial = {});

}  // namespace hwt::sweep
