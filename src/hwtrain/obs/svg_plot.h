// svg_line_plot(): a small, dependency-free SVG line plot for the run report: axes with "nice"
// ticks, grid, axis labels, a title and a legend. NaN values break a line (unknown values are
// not drawn as zeros); long series are reduced to the min and max of each pixel-wide bucket so
// spikes stay visible while the SVG stays small. Text is XML-escaped here.
#pragma once
#include <string>
#include <vector>

namespace hwt {

struct PlotSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;
  std::string color = "#1f77b4";
  bool markers = false;  // a dot per point (sparse series such as evaluations)
  bool dashed = false;
  bool line = true;      // false: the points alone (a scatter)
};

struct PlotSpec {
  std::string title;
  std::string x_label = "step";
  std::string y_label;
  std::vector<PlotSeries> series;
  bool y_from_zero = false;  // quantities whose zero is meaningful (throughput, memory)
  int width = 560;
  int height = 300;
};

// The <svg class="plot" ...> element. A spec with no finite points draws its frame and
// "no data recorded".
std::string svg_line_plot(const PlotSpec& spec);

// Tick positions at 1, 2 or 5 times a power of ten covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

// A short tick label: 0.0003 -> "3e-4", 6340 -> "6340", 1.5e6 -> "1.5M".
std::string format_tick(double v);

// Escapes &, <, >, " and ' for HTML/XML text and attributes.
std::string xml_escape(const std::string& text);

}  // namespace hwt
