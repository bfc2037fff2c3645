#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "hwtrain/core/error.h"
#include "hwtrain/sweep/grid_sampler.h"
#include "hwtrain/sweep/parzen_estimator.h"
#include "hwtrain/sweep/random_sampler.h"
#include "hwtrain/sweep/tpe_sampler.h"
#include "hwtrain/sweep/truncated_normal.h"

namespace hwt::sweep {
namespace {

ParamSpec sampler_spec(const std::string& key, ParamKind kind, double lo, double hi, int grid_points = 0) {
  ParamSpec s;
  s.key = key;
  s.kind = kind;
  s.low = lo;
  s.high = hi;
  s.grid_points = grid_points;
  return s;
}

ParamSpec sampler_choice(const std::string& key, std::vector<std::string> choices) {
  ParamSpec s;
  s.key = key;
  s.kind = ParamKind::kChoice;
  s.choices = std::move(choices);
  return s;
}

// One of each kind, so every sampler path is exercised.
SearchSpace sampler_mixed_space() {
  SearchSpace s;
  auto n_layer = sampler_spec("model.n_layer", ParamKind::kInt, 1, 64);
  n_layer.log = true;
  s.params = {sampler_spec("train.lr", ParamKind::kLogUniform, 1e-5, 1e-1), sampler_spec("train.wd", ParamKind::kUniform, 0, 0.3),
              sampler_spec("train.warmup", ParamKind::kInt, 0, 10), n_layer, sampler_choice("train.dtype", {"bf16", "fp32", "fp16"})};
  s.validate();
  return s;
}

void expect_in_space(const SearchSpace& space, const Params& params) {
  ASSERT_EQ(params.size(), space.params.size());
  for (const auto& spec : space.params) {
    ASSERT_TRUE(params.count(spec.key)) << spec.key;
    EXPECT_TRUE(is_value_of(spec, params.at(spec.key))) << spec.key << " = " << to_override_value(params.at(spec.key));
  }
}

Trial sampler_trial(std::int64_t number, Params params, TrialState state = TrialState::kComplete, double value = 0) {
  Trial t;
  t.number = number;
  t.params = std::move(params);
  t.state = state;
  if (state == TrialState::kComplete) t.value = value;
  return t;
}

TEST(PortableRandom, DrawsAreInRangeAndSeedDependent) {
  SweepRng rng(1);
  std::set<std::int64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const double u = u01(rng);
    ASSERT_TRUE(u >= 0 && u < 1);
    const auto k = uniform_int(rng, -3, 3);
    ASSERT_TRUE(k >= -3 && k <= 3);
    seen.insert(k);
  }
  EXPECT_EQ(seen.size(), 7u);
  // mt19937_64's 10000th output for the default seed is fixed by the standard; u01 uses its top 53 bits.
  SweepRng standard;
  standard.discard(9999);
  EXPECT_EQ(standard(), 9981545732273789042ULL);
  EXPECT_EQ(trial_seed(7, 3), trial_seed(7, 3));
  EXPECT_NE(trial_seed(7, 3), trial_seed(7, 4));
  EXPECT_NE(trial_seed(7, 3), trial_seed(8, 3));
}

TEST(GridSampler, EnumeratesTheProductOnceThenThrows) {
  SearchSpace s;
  s.params = {sampler_choice("act", {"relu", "gelu"}), sampler_spec("lr", ParamKind::kLogUniform, 1e-4, 1e-2, 3),
              sampler_spec("wd", ParamKind::kUniform, 0, 1, 2)};
  ASSERT_EQ(GridSampler::size(s), 12u);
  GridSampler grid;
  std::vector<Trial> history;
  std::set<std::string> combos;
  for (int i = 0; i < 12; ++i) {
    Params p = grid.sample(s, history, 0);
    expect_in_space(s, p);
    combos.insert(to_override_value(p["act"]) + "," + to_override_value(p["lr"]) + "," + to_override_value(p["wd"]));
    history.push_back(sampler_trial(i, p, i % 3 == 0 ? TrialState::kFailed : TrialState::kComplete));
  }
  EXPECT_EQ(combos.size(), 12u);
  EXPECT_TRUE(combos.count("relu,0.0001,0"));
  EXPECT_TRUE(combos.count("gelu,0.001,1"));  // log-spaced middle point
  EXPECT_TRUE(combos.count("gelu,0.01,1"));
  EXPECT_THROW(grid.sample(s, history, 0), hwt::Error);
  // The first parameter varies slowest: the first trial is the first of every axis, the second
  // changes only the last axis.
  EXPECT_EQ(std::get<double>(history[1].params["wd"]), 1.0);
  EXPECT_EQ(std::get<std::string>(history[1].params["act"]), "relu");
}

TEST(GridSampler, SkipsCombinationsInHistoryWhateverTheirState) {
  SearchSpace s;
  s.params = {sampler_spec("n", ParamKind::kInt, 1, 3)};  // every integer: 1, 2, 3
  GridSampler grid;
  std::vector<Trial> history{sampler_trial(0, {{"n", std::int64_t{1}}}, TrialState::kRunning),
                             sampler_trial(1, {{"n", std::int64_t{3}}}, TrialState::kInterrupted)};
  EXPECT_EQ(std::get<std::int64_t>(grid.sample(s, history, 0)["n"]), 2);
}

TEST(GridSampler, IntGridIsRoundedAndDeduplicated) {
  auto spec = sampler_spec("n", ParamKind::kInt, 1, 4, 7);  // 1, 1.5, 2, ... rounds to 1, 2, 2, 2, 3, 4, 4
  std::vector<std::int64_t> got;
  for (const auto& v : GridSampler::grid_values(spec)) got.push_back(std::get<std::int64_t>(v));
  EXPECT_EQ(got, (std::vector<std::int64_t>{1, 2, 3, 4}));
  auto logspec = sampler_spec("n", ParamKind::kInt, 1, 1000, 4);
  logspec.log = true;
  got.clear();
  for (const auto& v : GridSampler::grid_values(logspec)) got.push_back(std::get<std::int64_t>(v));
  EXPECT_EQ(got, (std::vector<std::int64_t>{1, 10, 100, 1000}));
}

TEST(GridSampler, RealRangeWithoutGridPointsNamesKey) {
  SearchSpace s;
  s.params = {sampler_spec("train.lr", ParamKind::kUniform, 0, 1)};
  try {
    GridSampler::size(s);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("grid needs grid_points on sweep.space.train.lr"), std::string::npos) << e.what();
  }
  s.params = {sampler_spec("model.n_embd", ParamKind::kInt, 1, 100000)};
  EXPECT_THROW(GridSampler().sample(s, {}, 0), ConfigError);
}

TEST(RandomSampler, StaysInBoundsAndIsDeterministicPerSeed) {
  const SearchSpace s = sampler_mixed_space();
  RandomSampler random;
  std::set<std::string> dtypes;
  std::set<std::int64_t> warmups;
  for (std::uint64_t seed = 0; seed < 500; ++seed) {
    const Params p = random.sample(s, {}, seed);
    expect_in_space(s, p);
    EXPECT_EQ(p, random.sample(s, {}, seed));
    dtypes.insert(std::get<std::string>(p.at("train.dtype")));
    warmups.insert(std::get<std::int64_t>(p.at("train.warmup")));
  }
  EXPECT_EQ(dtypes.size(), 3u);
  EXPECT_EQ(warmups.size(), 11u);  // both ends reached
  EXPECT_NE(random.sample(s, {}, 1), random.sample(s, {}, 2));
}

TEST(RandomSampler, LogUniformIsUniformInLogSpace) {
  const auto spec = sampler_spec("lr", ParamKind::kLogUniform, 1e-6, 1);
  SweepRng rng(3);
  int below_1e3 = 0;
  for (int i = 0; i < 4000; ++i) below_1e3 += std::get<double>(RandomSampler::sample_param(spec, rng)) < 1e-3;
  EXPECT_NEAR(below_1e3 / 4000.0, 0.5, 0.03);  // half the decades lie below 1e-3
}

TEST(TruncatedNormal, MatchesKnownValues) {
  EXPECT_NEAR(log_ndtr(0), std::log(0.5), 1e-15);
  EXPECT_NEAR(log_ndtr(-10), -53.23128515051247, 1e-9);  // scipy.special.log_ndtr(-10)
  EXPECT_NEAR(log_ndtr(-40), -804.6084420137538, 1e-9);  // asymptotic branch
  EXPECT_NEAR(log_ndtr(-20 + 1e-9), log_ndtr(-20 - 1e-9), 1e-6);  // continuous across the branch
  EXPECT_NEAR(std::exp(log_gauss_mass(-1, 1)), 0.6826894921370859, 1e-14);
  EXPECT_NEAR(log_gauss_mass(30, 31), log_gauss_mass(-31, -30), 1e-12);  // symmetric, far tail
  for (double p : {1e-12, 0.001, 0.2, 0.5, 0.9, 0.999999}) EXPECT_NEAR(0.5 * std::erfc(-ndtri(p) / std::sqrt(2.0)), p, 1e-14 + p * 1e-13);
  SweepRng rng(5);
  double mean = 0;
  for (int i = 0; i < 4000; ++i) {
    const double x = truncnorm_sample(rng, 0, 1, 0, 10);  // half-normal: mean sqrt(2 / pi)
    ASSERT_TRUE(x >= 0 && x <= 10);
    mean += x / 4000;
  }
  EXPECT_NEAR(mean, std::sqrt(2 / 3.14159265358979), 0.03);
}

TEST(ParzenEstimator, BandwidthsFollowOptunasRule) {
  // Observations 2, 3, 7 on [0, 10], their neighbours including the prior's centre 5 (Optuna's
  // mus_with_prior): 0 | 2 3 5 7 | 10 give sigmas 1 (first: no endpoint), max(1, 2) = 2, and 7's
  // 7 - 5 = 2 (last: no endpoint); magic clip lifts them to at least 10 / min(100, 3 + 2) = 2;
  // prior N(5, 10); weights 1/4. (Without the prior's centre 3 and 7 had 4: early TPE near random.)
  const auto spec = sampler_spec("x", ParamKind::kUniform, 0, 10);
  const ParzenEstimator pe(spec, {2, 3, 7}, ParzenOptions{});
  const double mus[] = {2, 3, 7, 5}, sigmas[] = {2, 2, 2, 10};
  for (double x : {0.0, 2.5, 6.0, 10.0}) {
    double p = 0;
    for (int k = 0; k < 4; ++k) {
      const double mass = 0.5 * (std::erf((10 - mus[k]) / sigmas[k] / std::sqrt(2.0)) - std::erf((0 - mus[k]) / sigmas[k] / std::sqrt(2.0)));
      p += 0.25 * std::exp(-0.5 * std::pow((x - mus[k]) / sigmas[k], 2)) / (sigmas[k] * std::sqrt(2 * 3.141592653589793)) / mass;
    }
    EXPECT_NEAR(pe.log_pdf(x), std::log(p), 1e-12) << x;
  }
}

TEST(ParzenEstimator, DensitiesAndMassesNormalize) {
  const auto real = sampler_spec("x", ParamKind::kLogUniform, 1e-3, 10);
  const ParzenEstimator pr(real, {0.01, 0.02, 5}, ParzenOptions{});
  double integral = 0;  // over log x, where the kernels live
  const int n = 20000;
  const double a = std::log(1e-3), b = std::log(10.0), h = (b - a) / n;
  for (int i = 0; i < n; ++i) integral += std::exp(pr.log_pdf(std::exp(a + (i + 0.5) * h))) * h;
  EXPECT_NEAR(integral, 1.0, 1e-6);
  const auto ints = sampler_spec("n", ParamKind::kInt, 1, 9);
  const ParzenEstimator pi(ints, {2, 2, 8}, ParzenOptions{});
  double mass = 0;
  for (int k = 1; k <= 9; ++k) mass += std::exp(pi.log_pdf(k));
  EXPECT_NEAR(mass, 1.0, 1e-12);
  const auto choice = sampler_choice("c", {"a", "b", "c"});
  const ParzenEstimator pc(choice, {0, 0, 2}, ParzenOptions{});
  // Kernels: (1 + 1/4, 1/4, 1/4) / 1.75 twice, (1/4, 1/4, 1.25) / 1.75, prior (1/3 each); weights 1/4.
  EXPECT_NEAR(std::exp(pc.log_pdf(0)), 0.25 * (2 * 1.25 / 1.75 + 0.25 / 1.75 + 1.0 / 3), 1e-12);
  double cmass = 0;
  for (int k = 0; k < 3; ++k) cmass += std::exp(pc.log_pdf(k));
  EXPECT_NEAR(cmass, 1.0, 1e-12);
}

TEST(ParzenEstimator, ObservationWeightsRampOldTrials) {
  EXPECT_EQ(tpe_observation_weights(3), (std::vector<double>{1, 1, 1}));
  const auto w = tpe_observation_weights(30);  // 5 ramped: linspace(1/30, 1, 5), then 25 ones
  EXPECT_NEAR(w[0], 1.0 / 30, 1e-15);
  EXPECT_NEAR(w[2], (1.0 / 30 + 1) / 2, 1e-15);
  EXPECT_EQ(w[4], 1.0);
  EXPECT_EQ(w[29], 1.0);
}

TEST(TpeSampler, SplitRanksCompleteThenPrunedByStepThenValue) {
  std::vector<Trial> h;
  h.push_back(sampler_trial(0, {}, TrialState::kComplete, 5.0));
  h.push_back(sampler_trial(1, {}, TrialState::kComplete, 1.0));
  h.push_back(sampler_trial(2, {}, TrialState::kPruned));
  h.back().intermediate = {{10, 0.1}};  // pruned early with a great value: still after complete trials
  h.push_back(sampler_trial(3, {}, TrialState::kPruned));
  h.back().intermediate = {{10, 0.5}, {30, 9.0}};  // reached step 30: ahead of trial 2
  h.push_back(sampler_trial(4, {}, TrialState::kFailed));
  h.push_back(sampler_trial(5, {}, TrialState::kRunning));
  auto numbers = [](const std::vector<const Trial*>& ts) {
    std::vector<std::int64_t> n;
    for (const Trial* t : ts) n.push_back(t->number);
    return n;
  };
  auto [below, above] = TpeSampler::split_trials(h, 3);
  EXPECT_EQ(numbers(below), (std::vector<std::int64_t>{0, 1, 3}));
  EXPECT_EQ(numbers(above), (std::vector<std::int64_t>{2}));
  std::tie(below, above) = TpeSampler::split_trials(h, 1);
  EXPECT_EQ(numbers(below), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(numbers(above), (std::vector<std::int64_t>{0, 2, 3}));
  TpeSampler tpe;
  EXPECT_EQ(tpe.n_below(10), 1);
  EXPECT_EQ(tpe.n_below(11), 2);
  EXPECT_EQ(tpe.n_below(1000), 25);
}

TEST(TpeSampler, StartsRandomThenStaysInBoundsAndDeterministic) {
  const SearchSpace s = sampler_mixed_space();
  TpeSampler tpe;
  RandomSampler random;
  std::vector<Trial> history;
  std::vector<double> lrs;
  for (int i = 0; i < 40; ++i) {
    const auto seed = trial_seed(11, i);
    const Params p = tpe.sample(s, history, seed);
    expect_in_space(s, p);
    EXPECT_EQ(p, tpe.sample(s, history, seed));
    if (i < 10) {
      EXPECT_EQ(p, random.sample(s, history, seed)) << "startup trial " << i;
    }
    const double lr = std::get<double>(p.at("train.lr"));
    lrs.push_back(lr);
    history.push_back(sampler_trial(i, p, TrialState::kComplete, std::pow(std::log10(lr) + 3, 2)));
    if (i % 7 == 3) history.push_back(sampler_trial(100 + i, p, TrialState::kFailed));  // ignored by TPE
  }
  // After 30 guided trials, the recent learning rates gather around the optimum 1e-3.
  int near = 0;
  for (int i = 30; i < 40; ++i) near += std::abs(std::log10(lrs[i]) + 3) < 1;
  EXPECT_GE(near, 7);
  TpeOptions bad;
  bad.n_ei_candidates = 0;
  EXPECT_THROW(TpeSampler{bad}, ConfigError);
}

}  // namespace
}  // namespace hwt::sweep
