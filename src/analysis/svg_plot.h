// A small SVG plot writer for the analysis report: line plots (linear or log axes), grouped bar
// charts and grouped box plots, with axes, ticks, labels and a legend. Self-contained SVG 1.1
// text, readable in any browser and in Markdown viewers; no external tools.
//
// Elements carry a class so that tests (and stylesheets) can find them: one
// <path class="series"> per line series, <rect class="bar"> per bar, per box a <rect class="box">,
// a <line class="median"> and a <line class="whisker">, <rect class="legend-swatch"> per legend
// entry (only when there are two or more series or a series has a label).
#pragma once

#include <string>
#include <vector>

namespace golinear::analysis {

struct PlotAxis {
  std::string label;
  bool log = false;  // base-10 ticks; values ≤ 0 are left out of the plot
};

struct LineSeries {
  std::string label;
  std::vector<double> x, y;  // same length; NaN/inf points (and ≤ 0 on a log axis) break the line
};

struct LinePlot {
  std::string title;
  PlotAxis x, y;
  std::vector<LineSeries> series;
};

// Grouped bars: for every category one bar per series.
struct BarSeries {
  std::string label;
  std::vector<double> values;  // one per category
};

struct BarPlot {
  std::string title;
  std::string x_label;
  PlotAxis y;                          // linear only (bars start at 0)
  std::vector<std::string> categories;
  std::vector<BarSeries> series;
};

// A box: quartiles and whiskers, whiskers at the 5th and 95th percentiles (with thousands of
// points per box, Tukey's 1.5·IQR fences would only add a cloud of outlier dots).
struct BoxStats {
  double low = 0, q1 = 0, median = 0, q3 = 0, high = 0;
  long count = 0;  // 0: an empty box, not drawn
};

// Percentiles by linear interpolation between order statistics; NaN/inf samples are dropped.
BoxStats box_stats(std::vector<double> samples);

struct BoxSeries {
  std::string label;
  std::vector<BoxStats> boxes;  // one per category
};

struct BoxPlot {
  std::string title;
  std::string x_label;
  PlotAxis y;
  std::vector<std::string> categories;
  std::vector<BoxSeries> series;
};

// Complete SVG documents (they start with "<svg").
std::string svg_line_plot(const LinePlot& plot);
std::string svg_bar_plot(const BarPlot& plot);
std::string svg_box_plot(const BoxPlot& plot);

}  // namespace golinear::analysis
