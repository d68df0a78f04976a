// The SVG writer: well-formed documents (tags balanced), the expected number of elements per
// series, log ticks, escaping, and the box statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "analysis/svg_plot.h"

namespace golinear::analysis {
namespace {

long count(const std::string& text, const std::string& what) {
  long n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every tag closed in order, a single root <svg>; attribute values hold no raw '<' or '>'.
::testing::AssertionResult well_formed(const std::string& svg) {
  if (svg.rfind("<svg", 0) != 0) return ::testing::AssertionFailure() << "does not start with <svg";
  std::vector<std::string> open;
  int roots = 0;
  for (size_t at = svg.find('<'); at != std::string::npos; at = svg.find('<', at + 1)) {
    const size_t end = svg.find('>', at);
    if (end == std::string::npos) return ::testing::AssertionFailure() << "unterminated tag at " << at;
    const std::string tag = svg.substr(at + 1, end - at - 1);
    if (tag.find('<') != std::string::npos) return ::testing::AssertionFailure() << "'<' inside a tag at " << at;
    if (tag.empty()) return ::testing::AssertionFailure() << "empty tag at " << at;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name)
        return ::testing::AssertionFailure() << "</" << name << "> closes "
                                             << (open.empty() ? "nothing" : open.back());
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
    if (open.empty()) ++roots;
    if (tag.back() != '/') open.push_back(name);
  }
  if (!open.empty()) return ::testing::AssertionFailure() << "<" << open.back() << "> never closed";
  if (roots != 1) return ::testing::AssertionFailure() << roots << " root elements";
  return ::testing::AssertionSuccess();
}

TEST(SvgPlot, LinePlotOnLogAxes) {
  LinePlot plot;
  plot.title = "NMSE a < b & c";
  plot.x = {"position", true};
  plot.y = {"nmse", true};
  for (int s = 0; s < 3; ++s) {
    LineSeries series{"mixer " + std::to_string(s), {}, {}};
    for (int t = 1; t <= 1000; t *= 2) {
      series.x.push_back(t);
      series.y.push_back(0.01 * (s + 1) / std::sqrt(t));
    }
    plot.series.push_back(series);
  }
  const std::string svg = svg_line_plot(plot);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(count(svg, "<path class=\"series\""), 3);
  EXPECT_EQ(count(svg, "class=\"legend-swatch\""), 3);
  EXPECT_NE(svg.find("NMSE a &lt; b &amp; c"), std::string::npos);
  // x spans 1..512 → decades 1, 10, 100, 1000 as ticks.
  for (const char* tick : {">1<", ">10<", ">100<", ">1000<"})
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
}

TEST(SvgPlot, NonFiniteAndNonPositivePointsBreakTheLine) {
  LinePlot plot;
  plot.title = "gaps";
  plot.x = {"x", false};
  plot.y = {"y", true};
  plot.series.push_back({"", {1, 2, 3, 4, 5, 6}, {1, 2, std::nan(""), 4, 0, 6}});
  const std::string svg = svg_line_plot(plot);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count(svg, "<path class=\"series\""), 1);
  const size_t d = svg.find("d=\"", svg.find("<path class=\"series\""));
  const std::string path = svg.substr(d, svg.find('"', d + 3) - d);
  EXPECT_EQ(count(path, "M"), 3) << path;  // segments {1,2}, {4}, {6}
  EXPECT_EQ(count(path, "L"), 1) << path;
  EXPECT_EQ(count(svg, "legend-swatch"), 0);  // one unlabelled series: no legend
}

TEST(SvgPlot, GroupedBars) {
  BarPlot plot;
  plot.title = "hardness";
  plot.x_label = "layer";
  plot.y = {"hardness"};
  plot.categories = {"0", "1", "2", "3"};
  plot.series = {{"teacher", {0.1, 0.5, 1.0, 0.0}}, {"student", {0.2, 0.4, 0.9, 0.3}}};
  const std::string svg = svg_bar_plot(plot);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), 8);
  EXPECT_EQ(count(svg, "class=\"legend-swatch\""), 2);
}

TEST(SvgPlot, BoxPlotSkipsEmptyBoxes) {
  BoxPlot plot;
  plot.title = "nmse by bucket";
  plot.x_label = "bucket";
  plot.y = {"nmse", true};
  plot.categories = {"low", "mid", "high"};
  std::vector<double> samples;
  for (int i = 1; i <= 50; ++i) samples.push_back(0.001 * i);
  plot.series.push_back({"gdn", {box_stats(samples), box_stats(samples), box_stats({})}});
  plot.series.push_back({"gla", {box_stats(samples), box_stats(samples), box_stats(samples)}});
  const std::string svg = svg_box_plot(plot);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count(svg, "<rect class=\"box\""), 5);
  EXPECT_EQ(count(svg, "<line class=\"median\""), 5);
  EXPECT_EQ(count(svg, "<line class=\"whisker\""), 5);
}

TEST(SvgPlot, BoxStatsPercentiles) {
  std::vector<double> samples;
  for (int i = 101; i >= 1; --i) samples.push_back(i);  // order does not matter
  samples.push_back(std::nan(""));                      // dropped
  const BoxStats b = box_stats(samples);
  EXPECT_EQ(b.count, 101);
  EXPECT_DOUBLE_EQ(b.low, 6);
  EXPECT_DOUBLE_EQ(b.q1, 26);
  EXPECT_DOUBLE_EQ(b.median, 51);
  EXPECT_DOUBLE_EQ(b.q3, 76);
  EXPECT_DOUBLE_EQ(b.high, 96);
  // Interpolated between order statistics: {0, 10} → median 5, q1 2.5.
  const BoxStats two = box_stats({10, 0});
  EXPECT_DOUBLE_EQ(two.median, 5);
  EXPECT_DOUBLE_EQ(two.q1, 2.5);
  EXPECT_EQ(box_stats({}).count, 0);
}

}  // namespace
}  // namespace golinear::analysis
