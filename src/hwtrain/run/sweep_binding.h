// What `hwtrain sweep` needs to know of a run that the sweep area (sweep/, below every other area)
// does not: which config keys and metric names exist, whether each value of a space is one the
// base config accepts, and the machine a trial gets (cores, GPUs, and on GPUs the peak memory the
// planner predicts for one trial of the base config, so that small trials can share a GPU).
#pragma once
#include <string>

#include "hwtrain/hw/hardware_profile.h"
#include "hwtrain/run/run_config.h"
#include "hwtrain/sweep/sweep_config.h"
#include "hwtrain/sweep/trial_parallelism.h"

namespace hwt {

// Config keys for sweep.space and the metric names for sweep.objective.
sweep::SweepKeyChecks sweep_key_checks();

// Applies every bound and choice of the space to `base` and validates it: a misspelt choice or a
// bound of the wrong type is a ConfigError naming the sweep file, the key and the value now, not a
// failed trial per value later.
void check_space_values(const sweep::SweepConfig& config, const RunConfig& base);
// ConfigError naming sweep.objective or sweep.at_step when no trial of `base` could report the
// objective: an evaluation metric without evaluations, a step past train.max_steps or one that
// evaluates nothing (unless the space searches the key that decides it).
void check_objective_reported(const sweep::SweepConfig& config, const RunConfig& base);

// CUDA_VISIBLE_DEVICES for a trial of GPU slot `gpu`: the slots count the GPUs this process sees,
// so under a mask of its own (`mask`: "2,3" in a Slurm job without device cgroups, or UUIDs) slot 0
// is the mask's first entry, not physical GPU 0. A null or empty mask: the index itself.
std::string trial_visible_device(int gpu, const char* mask);

// The parallelism decision's inputs for `hw`. On GPUs, a trial's memory is the base config's
// planned peak on one of them (the space's own values may change it; the base is what is known
// before any trial runs); unknown (one trial per GPU) when the vocabulary size is not set and the
// tokenizer is not the byte one. `note` says which.
sweep::ParallelismInputs sweep_parallelism_inputs(const HardwareProfile& hw, const RunConfig& base, int parallel,
                                                  int trials_left, std::string* note);

}  // namespace hwt
