#include "hwtrain/sweep/truncated_normal.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hwt::sweep {
namespace {

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2Pi = 2.50662827463100050242;     // sqrt(2 pi)
constexpr double kLogSqrt2Pi = 0.91893853320467274178;  // log sqrt(2 pi)

double ndtr(double x) { return 0.5 * std::erfc(-x / kSqrt2); }

// log(exp(la) - exp(lb)) for la >= lb.
double log_diff_exp(double la, double lb) {
  if (lb == -std::numeric_limits<double>::infinity()) return la;
  if (la <= lb) return -std::numeric_limits<double>::infinity();
  return la + std::log1p(-std::exp(lb - la));
}

// Acklam's rational approximation of the inverse normal CDF (relative error < 1.15e-9).
double acklam_ndtri(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double p_low = 0.02425;
  if (p < p_low) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - p_low) return -acklam_ndtri(1 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

}  // namespace

double log_ndtr(double x) {
  if (x > 6) return std::log1p(-ndtr(-x));
  if (x > -20) return std::log(ndtr(x));
  // Asymptotic series: Phi(x) = phi(x)/(-x) * (1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8 - ...).
  const double r = 1 / (x * x);
  const double series = 1 - r * (1 - 3 * r * (1 - 5 * r * (1 - 7 * r)));
  return -0.5 * x * x - kLogSqrt2Pi - std::log(-x) + std::log(series);
}

double log_gauss_mass(double a, double b) {
  if (!(a < b)) return -std::numeric_limits<double>::infinity();
  if (b <= 0) return log_diff_exp(log_ndtr(b), log_ndtr(a));     // both in the left tail
  if (a >= 0) return log_diff_exp(log_ndtr(-a), log_ndtr(-b));   // both in the right tail: mirror
  return std::log1p(-ndtr(a) - ndtr(-b));                         // straddles 0: 1 - both tails
}

double ndtri(double p) {
  if (p <= 0) return -std::numeric_limits<double>::infinity();
  if (p >= 1) return std::numeric_limits<double>::infinity();
  double x = acklam_ndtri(p);
  // One Halley step on Phi(x) - p brings the error to about machine precision.
  const double e = ndtr(x) - p;
  const double u = e * kSqrt2Pi * std::exp(0.5 * x * x);
  return x - u / (1 + 0.5 * x * u);
}

double truncnorm_log_pdf(double x, double mu, double sigma, double low, double high) {
  if (x < low || x > high) return -std::numeric_limits<double>::infinity();
  const double z = (x - mu) / sigma;
  return -0.5 * z * z - kLogSqrt2Pi - std::log(sigma) - log_gauss_mass((low - mu) / sigma, (high - mu) / sigma);
}

double truncnorm_sample(SweepRng& rng, double mu, double sigma, double low, double high) {
  const double a = (low - mu) / sigma, b = (high - mu) / sigma;
  // With a <= 0 <= b and b - a >= 1 (sigma is at most the range) the mass is at least 0.34, so the
  // plain inverse CDF loses no accuracy worth having.
  const double pa = ndtr(a), pb = ndtr(b);
  const double z = std::clamp(ndtri(pa + u01(rng) * (pb - pa)), a, b);
  return std::clamp(mu + sigma * z, low, high);
}

}  // namespace hwt::sweep
