// The standard-normal functions the TPE sampler's Parzen estimators need, accurate far into the
// tails (log-space), as Optuna's samplers/_tpe/_truncnorm.py computes them: log Phi, the log mass of
// an interval, the inverse CDF and a truncated-normal draw. Plain functions on doubles; no state.
#pragma once
#include "hwtrain/sweep/sampler.h"

namespace hwt::sweep {

// log Phi(x), Phi the standard normal CDF; finite for x down to about -1e150.
double log_ndtr(double x);
// log (Phi(b) - Phi(a)) for a <= b; -inf when the interval is empty.
double log_gauss_mass(double a, double b);
// Phi^-1(p) for p in [0, 1]; -inf at 0, +inf at 1. Relative error about 1e-15.
double ndtri(double p);
// log of the density at x of N(mu, sigma^2) truncated to [low, high] (x assumed inside).
double truncnorm_log_pdf(double x, double mu, double sigma, double low, double high);
// A draw from N(mu, sigma^2) truncated to [low, high], by the inverse CDF; needs low <= mu <= high,
// which every Parzen kernel satisfies (its centre is an observation or the middle of the range).
double truncnorm_sample(SweepRng& rng, double mu, double sigma, double low, double high);

}  // namespace hwt::sweep
