// RandomSampler: every parameter drawn independently of the others and of the history: uniform,
// log-uniform, uniform integer (log-uniform then rounded when the int range is log) and uniform
// choice. It is the baseline the TPE sampler is tested against and the TPE's startup sampler.
#pragma once
#include "hwtrain/sweep/sampler.h"

namespace hwt::sweep {

class RandomSampler : public Sampler {
 public:
  Params sample(const SearchSpace& space, const std::vector<Trial>& history, std::uint64_t seed) override;
  std::string name() const override { return "random"; }

  // One value of `spec` from `rng` (the draw TPE's startup trials use as well).
  static ParamValue sample_param(const ParamSpec& spec, SweepRng& rng);
};

}  // namespace hwt::sweep
