#include "hwtrain/sweep/param_importance.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace hwt::sweep {

namespace {

// Average ranks (ties share their mean rank), 1-based.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) / 2.0) + 1.0;
    i = j + 1;
  }
  return r;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

double as_number(const ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return NAN;
}

// eta^2: between-group sum of squares over the total.
double correlation_ratio(const std::vector<std::string>& groups, const std::vector<double>& y) {
  const double mean = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(y.size());
  std::map<std::string, std::pair<double, int>> sums;
  double total = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    sums[groups[i]].first += y[i];
    sums[groups[i]].second += 1;
    total += (y[i] - mean) * (y[i] - mean);
  }
  double between = 0;
  for (const auto& [g, s] : sums) {
    const double m = s.first / s.second;
    between += s.second * (m - mean) * (m - mean);
  }
  return total > 0 ? between / total : 0.0;
}

}  // namespace

std::vector<ParamImportance> param_importance(const SearchSpace& space, const std::vector<Trial>& trials) {
  std::vector<const Trial*> done;
  for (const Trial& t : trials) {
    if (t.state == TrialState::kComplete && t.value && std::isfinite(*t.value)) done.push_back(&t);
  }
  if (done.size() < 3) return {};
  std::vector<double> y;
  for (const Trial* t : done) y.push_back(*t->value);
  std::vector<ParamImportance> out;
  for (const ParamSpec& p : space.params) {
    ParamImportance imp{p.key, p.kind == ParamKind::kChoice ? "eta^2" : "rho^2", 0.0, 0.0};
    if (p.kind == ParamKind::kChoice) {
      std::vector<std::string> groups;
      for (const Trial* t : done) groups.push_back(t->params.count(p.key) ? to_override_value(t->params.at(p.key)) : "");
      imp.value = correlation_ratio(groups, y);
    } else {
      std::vector<double> x;
      for (const Trial* t : done) x.push_back(t->params.count(p.key) ? as_number(t->params.at(p.key)) : NAN);
      const double rho = pearson(ranks(x), ranks(y));
      imp.value = rho * rho;
    }
    out.push_back(imp);
  }
  double sum = 0;
  for (const auto& i : out) sum += i.value;
  for (auto& i : out) i.share = sum > 0 ? i.value / sum : 0.0;
  std::sort(out.begin(), out.end(), [](const ParamImportance& a, const ParamImportance& b) { return a.value > b.value; });
  return out;
}

}  // namespace hwt::sweep
