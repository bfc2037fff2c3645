#include "hwtrain/obs/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace hwt {

namespace {
constexpr int kMarginLeft = 64;
constexpr int kMarginRight = 18;
constexpr int kMarginTop = 50;  // title and legend
constexpr int kMarginBottom = 42;
constexpr size_t kMaxPointsPerSeries = 1200;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

bool finite(double v) { return std::isfinite(v); }

// Keeps the first and last point and, per bucket of consecutive points, the lowest and highest.
void decimate(std::vector<double>& x, std::vector<double>& y) {
  if (x.size() <= kMaxPointsPerSeries) return;
  const size_t num_buckets = kMaxPointsPerSeries / 2;
  const size_t per_bucket = (x.size() + num_buckets - 1) / num_buckets;
  std::vector<double> nx, ny;
  for (size_t start = 0; start < x.size(); start += per_bucket) {
    size_t end = std::min(x.size(), start + per_bucket);
    size_t lo = start, hi = start;
    bool any_nan = false;
    for (size_t i = start; i < end; ++i) {
      if (!finite(y[i])) {
        any_nan = true;
        continue;
      }
      if (!finite(y[lo]) || y[i] < y[lo]) lo = i;
      if (!finite(y[hi]) || y[i] > y[hi]) hi = i;
    }
    for (size_t i : {std::min(lo, hi), std::max(lo, hi)}) {
      nx.push_back(x[i]);
      ny.push_back(y[i]);
    }
    if (any_nan) {  // keep the gap
      nx.push_back(x[end - 1]);
      ny.push_back(std::numeric_limits<double>::quiet_NaN());
    }
  }
  x.swap(nx);
  y.swap(ny);
}
}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::string format_tick(double v) {
  char buf[32];
  const double a = std::abs(v);
  if (a == 0) return "0";
  if (a >= 1e9) std::snprintf(buf, sizeof buf, "%gG", v / 1e9);
  else if (a >= 1e6) std::snprintf(buf, sizeof buf, "%gM", v / 1e6);
  else if (a >= 1e4) std::snprintf(buf, sizeof buf, "%gk", v / 1e3);
  else if (a >= 1e-3) std::snprintf(buf, sizeof buf, "%.4g", v);
  else {
    std::snprintf(buf, sizeof buf, "%.0e", v);  // 3e-04 -> 3e-4: shorter under a crowded axis
    std::string s = buf;
    auto e = s.find("e-0");
    if (e != std::string::npos) s.erase(e + 2, 1);
    return s;
  }
  return buf;
}

namespace {

// The plot area in pixels and the data range it shows.
struct Frame {
  double x0, x1, y0, y1;          // left, right, bottom, top (pixels)
  double xmin, xmax, ymin, ymax;  // data
  double px(double x) const { return x0 + (x - xmin) / (xmax - xmin) * (x1 - x0); }
  double py(double y) const { return y0 - (y - ymin) / (ymax - ymin) * (y0 - y1); }
};

// The series with at least one known point (decimated), their point counts, and the data range.
std::vector<PlotSeries> known_series(const PlotSpec& spec, std::vector<size_t>& num_points, Frame& f) {
  std::vector<PlotSeries> series;
  f.xmin = INFINITY, f.xmax = -INFINITY, f.ymin = INFINITY, f.ymax = -INFINITY;
  for (PlotSeries s : spec.series) {
    s.y.resize(s.x.size(), std::numeric_limits<double>::quiet_NaN());
    decimate(s.x, s.y);
    size_t n = 0;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!finite(s.x[i]) || !finite(s.y[i])) continue;
      ++n;
      f.xmin = std::min(f.xmin, s.x[i]);
      f.xmax = std::max(f.xmax, s.x[i]);
      f.ymin = std::min(f.ymin, s.y[i]);
      f.ymax = std::max(f.ymax, s.y[i]);
    }
    if (n == 0) continue;  // left out, legend included
    series.push_back(std::move(s));
    num_points.push_back(n);
  }
  return series;
}

// Widens a degenerate range and adds 5% of headroom (none below a meaningful zero).
void pad_range(const PlotSpec& spec, Frame& f) {
  if (spec.y_from_zero) {
    f.ymin = std::min(f.ymin, 0.0);
    f.ymax = std::max(f.ymax, 0.0);
  }
  if (f.xmax == f.xmin) f.xmin -= 1, f.xmax += 1;
  if (f.ymax == f.ymin) {
    const double pad = f.ymin == 0 ? 1 : std::abs(f.ymin) * 0.1;
    f.ymin -= pad;
    f.ymax += pad;
  } else {
    const double pad = (f.ymax - f.ymin) * 0.05;
    if (!(spec.y_from_zero && f.ymin == 0)) f.ymin -= pad;
    f.ymax += pad;
  }
}

// Grid, ticks, tick labels, axes and axis labels.
std::string axes_svg(const PlotSpec& spec, const Frame& f) {
  std::string o;
  for (double t : nice_ticks(f.ymin, f.ymax, 5)) {
    o += "<line x1=\"" + num(f.x0) + "\" x2=\"" + num(f.x1) + "\" y1=\"" + num(f.py(t)) + "\" y2=\"" +
         num(f.py(t)) + "\" class=\"grid\"/>\n";
    o += "<text x=\"" + num(f.x0 - 6) + "\" y=\"" + num(f.py(t) + 4) +
         "\" text-anchor=\"end\" class=\"tick\">" + xml_escape(format_tick(t)) + "</text>\n";
  }
  for (double t : nice_ticks(f.xmin, f.xmax, 6)) {
    o += "<line x1=\"" + num(f.px(t)) + "\" x2=\"" + num(f.px(t)) + "\" y1=\"" + num(f.y0) + "\" y2=\"" +
         num(f.y0 + 5) + "\" class=\"axis\"/>\n";
    o += "<text x=\"" + num(f.px(t)) + "\" y=\"" + num(f.y0 + 18) +
         "\" text-anchor=\"middle\" class=\"tick\">" + xml_escape(format_tick(t)) + "</text>\n";
  }
  o += "<path d=\"M" + num(f.x0) + " " + num(f.y1) + " V" + num(f.y0) + " H" + num(f.x1) +
       "\" class=\"axis\" fill=\"none\"/>\n";
  o += "<text x=\"" + num((f.x0 + f.x1) / 2) + "\" y=\"" + num(spec.height - 6) +
       "\" text-anchor=\"middle\" class=\"label\">" + xml_escape(spec.x_label) + "</text>\n";
  o += "<text transform=\"translate(14 " + num((f.y0 + f.y1) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\" class=\"label\">" + xml_escape(spec.y_label) + "</text>\n";
  return o;
}

// One series: its line (NaN lifts the pen), its markers, and its legend entry at `legend_x`.
std::string series_svg(const PlotSeries& s, size_t num_points, const Frame& f, double legend_x) {
  std::string o, d;
  bool pen_down = false;
  for (size_t i = 0; i < s.x.size(); ++i) {
    if (!finite(s.x[i]) || !finite(s.y[i])) {
      pen_down = false;
      continue;
    }
    d += (pen_down ? " L" : " M") + num(f.px(s.x[i])) + " " + num(f.py(s.y[i]));
    pen_down = true;
  }
  if (s.line) {
    o += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.6\" stroke-linejoin=\"round\"" +
         (s.dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>\n";
  }
  if (s.markers || !s.line || num_points == 1) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!finite(s.x[i]) || !finite(s.y[i])) continue;
      o += "<circle cx=\"" + num(f.px(s.x[i])) + "\" cy=\"" + num(f.py(s.y[i])) + "\" r=\"3\" fill=\"" + s.color +
           "\"/>\n";
    }
  }
  o += "<rect x=\"" + num(legend_x) + "\" y=\"28\" width=\"14\" height=\"4\" fill=\"" + s.color + "\"/>\n";
  o += "<text x=\"" + num(legend_x + 18) + "\" y=\"34\" class=\"legend\">" + xml_escape(s.name) + "</text>\n";
  return o;
}

}  // namespace

std::string svg_line_plot(const PlotSpec& spec) {
  const double W = spec.width, H = spec.height;
  Frame f{kMarginLeft, W - kMarginRight, H - kMarginBottom, kMarginTop, 0, 0, 0, 0};
  std::vector<size_t> num_points;
  const std::vector<PlotSeries> series = known_series(spec, num_points, f);

  std::string o;
  o += "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + num(W) + " " + num(H) +
       "\" role=\"img\" aria-label=\"" + xml_escape(spec.title) + "\">\n";
  o += "<rect x=\"0\" y=\"0\" width=\"" + num(W) + "\" height=\"" + num(H) + "\" fill=\"#ffffff\"/>\n";
  o += "<text x=\"" + num(f.x0) + "\" y=\"18\" class=\"title\">" + xml_escape(spec.title) + "</text>\n";
  if (series.empty()) {
    o += "<rect x=\"" + num(f.x0) + "\" y=\"" + num(f.y1) + "\" width=\"" + num(f.x1 - f.x0) + "\" height=\"" +
         num(f.y0 - f.y1) + "\" fill=\"none\" stroke=\"#999\"/>\n";
    o += "<text x=\"" + num((f.x0 + f.x1) / 2) + "\" y=\"" + num((f.y0 + f.y1) / 2) +
         "\" text-anchor=\"middle\" class=\"nodata\">no data recorded</text>\n</svg>\n";
    return o;
  }
  pad_range(spec, f);
  o += axes_svg(spec, f);
  double legend_x = f.x0;
  for (size_t k = 0; k < series.size(); ++k) {
    o += series_svg(series[k], num_points[k], f, legend_x);
    legend_x += 30 + 6.5 * static_cast<double>(series[k].name.size());
  }
  return o + "</svg>\n";
}

}  // namespace hwt
