#include "hwtrain/sweep/sweep_components.h"

#include "hwtrain/sweep/asha_pruner.h"
#include "hwtrain/sweep/base_config.h"
#include "hwtrain/sweep/grid_sampler.h"
#include "hwtrain/sweep/median_pruner.h"
#include "hwtrain/sweep/random_sampler.h"
#include "hwtrain/sweep/tpe_sampler.h"

namespace hwt::sweep {

std::unique_ptr<Sampler> make_sampler(const SweepConfig& config) {
  switch (config.sampler) {
    case SamplerKind::kGrid: return std::make_unique<GridSampler>();
    case SamplerKind::kRandom: return std::make_unique<RandomSampler>();
    case SamplerKind::kTpe: return std::make_unique<TpeSampler>(config.tpe);
  }
  return nullptr;
}

std::unique_ptr<Pruner> make_pruner(const SweepConfig& config) {
  switch (config.pruner) {
    case PrunerKind::kNone: return nullptr;
    case PrunerKind::kMedian: return std::make_unique<MedianPruner>(config.median);
    case PrunerKind::kAsha: return std::make_unique<AshaPruner>(config.asha);
  }
  return nullptr;
}

StudyInfo make_study_info(const SweepConfig& config, const std::vector<std::string>& set_per_trial) {
  StudyInfo info;
  info.name = config.study.stem().string();
  info.space_fingerprint = fingerprint(config.space);
  info.direction = enum_name(config.direction);
  // A value at a fixed step is another objective than the last value: the two never mix in one study.
  info.objective = config.objective + (config.at_step > 0 ? "@" + std::to_string(config.at_step) : "");
  std::vector<std::string> ignored = set_per_trial;
  for (const ParamSpec& p : config.space.params) ignored.push_back(p.key);
  info.base_config = recorded_base_config(config.base_config, ignored);
  return info;
}

}  // namespace hwt::sweep
