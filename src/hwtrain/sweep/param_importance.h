// How much of the spread of the objective each parameter explains, over the completed trials: a
// simple, named measure instead of fANOVA (which fits a random forest: more trials than a sweep of
// tens has). For a range: the squared Spearman rank correlation between the parameter (ranks are
// unchanged by a log scale) and the objective, rho^2; for a choice: the correlation ratio eta^2
// (the share of the objective's variance between the choice's groups). Shares are the values
// normalised to sum to 1. A monotone effect scores high; an effect with an optimum in the middle of
// a range scores low under rho^2, which the report says.
#pragma once
#include <string>
#include <vector>

#include "hwtrain/sweep/search_space.h"
#include "hwtrain/sweep/trial.h"

namespace hwt::sweep {

struct ParamImportance {
  std::string key;
  std::string measure;  // "rho^2" or "eta^2"
  double value = 0;     // in [0, 1]
  double share = 0;     // value / sum of values (0 when every value is 0)
};

// Over trials that are complete with a finite value; empty when fewer than 3 are. Sorted by value,
// largest first.
std::vector<ParamImportance> param_importance(const SearchSpace& space, const std::vector<Trial>& trials);

}  // namespace hwt::sweep
