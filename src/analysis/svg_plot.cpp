#include "analysis/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace golinear::analysis {

namespace {

constexpr int kWidth = 760, kHeight = 440;
constexpr int kMarginLeft = 78, kMarginTop = 40, kMarginBottom = 62;
constexpr int kLegendWidth = 170;
// tab10: distinct at a glance, readable for the common colour-vision deficiencies.
const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

const char* color_of(size_t i) { return kPalette[i % (sizeof kPalette / sizeof kPalette[0])]; }

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number_text(double v) {
  char text[32];
  if (v == 0.0) return "0";
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

std::string coordinate(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", v);
  return text;
}

bool finite(double v) { return std::isfinite(v); }

// Maps data values of one axis to pixels, with its ticks.
struct Scale {
  bool log = false;
  double lo = 0, hi = 1;        // data domain (log: the values themselves, > 0)
  double pixel_lo = 0, pixel_hi = 1;
  std::vector<double> ticks;

  double operator()(double v) const {
    const double a = log ? std::log10(v) : v, b0 = log ? std::log10(lo) : lo,
                 b1 = log ? std::log10(hi) : hi;
    const double f = b1 > b0 ? (a - b0) / (b1 - b0) : 0.5;
    return pixel_lo + f * (pixel_hi - pixel_lo);
  }
  bool accepts(double v) const { return finite(v) && (!log || v > 0); }
};

// A linear domain widened to "nice" ticks (steps of 1, 2 or 5 × 10^k, about six of them).
Scale linear_scale(double lo, double hi, bool include_zero) {
  Scale s;
  if (!finite(lo) || !finite(hi)) lo = 0, hi = 1;
  if (include_zero) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    const double pad = std::fabs(hi) > 0 ? std::fabs(hi) * 0.1 : 1.0;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / 6.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  s.lo = std::floor(lo / step + 1e-9) * step;
  s.hi = std::ceil(hi / step - 1e-9) * step;
  for (double v = s.lo; v <= s.hi + step * 1e-6; v += step)
    s.ticks.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return s;
}

// A log domain widened to whole decades; ticks at every decade (every other one beyond ten
// decades), with 2 and 5 added when it spans at most two decades.
Scale log_scale(double lo, double hi) {
  Scale s;
  s.log = true;
  if (!(lo > 0) || !finite(lo) || !finite(hi) || hi < lo) lo = 1, hi = 10;
  int d0 = (int)std::floor(std::log10(lo) + 1e-9), d1 = (int)std::ceil(std::log10(hi) - 1e-9);
  if (d1 <= d0) d1 = d0 + 1;
  s.lo = std::pow(10.0, d0);
  s.hi = std::pow(10.0, d1);
  const int every = d1 - d0 > 10 ? 2 : 1;
  for (int d = d0; d <= d1; d += every) {
    s.ticks.push_back(std::pow(10.0, d));
    if (d1 - d0 <= 2 && d < d1)
      for (double m : {2.0, 5.0}) s.ticks.push_back(m * std::pow(10.0, d));
  }
  return s;
}

Scale scale_for(const PlotAxis& axis, double lo, double hi, bool include_zero) {
  return axis.log ? log_scale(lo, hi) : linear_scale(lo, hi, include_zero);
}

// The frame every plot shares: title, plot area, axis labels, y grid and ticks; the x ticks are
// drawn by the caller (numeric or categorical).
class Canvas {
 public:
  Canvas(const std::string& title, bool legend) {
    right_ = kWidth - (legend ? kLegendWidth : 24);
    out_ << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\""
         << kHeight << "\" viewBox=\"0 0 " << kWidth << " " << kHeight
         << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
    out_ << "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" << kWidth << "\" height=\""
         << kHeight << "\" fill=\"white\"/>\n";
    out_ << "<text class=\"title\" x=\"" << (kMarginLeft + right_) / 2 << "\" y=\"24\" "
         << "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">" << xml_escape(title)
         << "</text>\n";
  }

  int left() const { return kMarginLeft; }
  int right() const { return right_; }
  int top() const { return kMarginTop; }
  int bottom() const { return kHeight - kMarginBottom; }
  std::ostringstream& out() { return out_; }

  void y_axis(const Scale& y, const std::string& label) {
    for (double v : y.ticks) {
      const std::string py = coordinate(y(v));
      out_ << "<line class=\"grid\" x1=\"" << left() << "\" x2=\"" << right() << "\" y1=\"" << py
           << "\" y2=\"" << py << "\" stroke=\"#e5e5e5\"/>\n";
      out_ << "<line class=\"tick\" x1=\"" << left() - 5 << "\" x2=\"" << left() << "\" y1=\""
           << py << "\" y2=\"" << py << "\" stroke=\"black\"/>\n";
      out_ << "<text class=\"tick-label\" x=\"" << left() - 8 << "\" y=\"" << py
           << "\" dy=\"4\" text-anchor=\"end\">" << number_text(v) << "</text>\n";
    }
    out_ << "<text class=\"axis-label\" transform=\"translate(18," << (top() + bottom()) / 2
         << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(label) << "</text>\n";
  }

  void x_numeric_axis(const Scale& x, const std::string& label) {
    for (double v : x.ticks) {
      const std::string px = coordinate(x(v));
      out_ << "<line class=\"tick\" x1=\"" << px << "\" x2=\"" << px << "\" y1=\"" << bottom()
           << "\" y2=\"" << bottom() + 5 << "\" stroke=\"black\"/>\n";
      out_ << "<text class=\"tick-label\" x=\"" << px << "\" y=\"" << bottom() + 19
           << "\" text-anchor=\"middle\">" << number_text(v) << "</text>\n";
    }
    x_label(label);
  }

  void x_label(const std::string& label) {
    out_ << "<text class=\"axis-label\" x=\"" << (left() + right()) / 2 << "\" y=\""
         << kHeight - 14 << "\" text-anchor=\"middle\">" << xml_escape(label) << "</text>\n";
  }

  void frame() {
    out_ << "<rect class=\"frame\" x=\"" << left() << "\" y=\"" << top() << "\" width=\""
         << right() - left() << "\" height=\"" << bottom() - top()
         << "\" fill=\"none\" stroke=\"black\"/>\n";
  }

  void legend(const std::vector<std::string>& labels) {
    out_ << "<g class=\"legend\">\n";
    for (size_t i = 0; i < labels.size(); ++i) {
      const int y = top() + 8 + 20 * (int)i;
      out_ << "<rect class=\"legend-swatch\" x=\"" << right() + 14 << "\" y=\"" << y
           << "\" width=\"14\" height=\"10\" fill=\"" << color_of(i) << "\"/>\n";
      out_ << "<text class=\"legend-label\" x=\"" << right() + 34 << "\" y=\"" << y + 9 << "\">"
           << xml_escape(labels[i]) << "</text>\n";
    }
    out_ << "</g>\n";
  }

  std::string finish() {
    out_ << "</svg>\n";
    return out_.str();
  }

 private:
  int right_;
  std::ostringstream out_;
};

bool wants_legend(size_t count, const std::string& first_label) {
  return count > 1 || (count == 1 && !first_label.empty());
}

// Horizontal categories: slot i spans [left + i·w, left + (i+1)·w).
void x_categorical_axis(Canvas& canvas, const std::vector<std::string>& categories,
                        const std::string& label) {
  const double slot = (canvas.right() - canvas.left()) / (double)std::max<size_t>(1, categories.size());
  const bool slanted = categories.size() > 8;
  for (size_t i = 0; i < categories.size(); ++i) {
    const double px = canvas.left() + slot * (i + 0.5);
    canvas.out() << "<text class=\"tick-label\" x=\"" << coordinate(px) << "\" y=\""
                 << canvas.bottom() + 18 << "\" text-anchor=\"" << (slanted ? "end" : "middle")
                 << "\"" << (slanted ? " transform=\"rotate(-30 " + coordinate(px) + " " +
                                           std::to_string(canvas.bottom() + 18) + ")\""
                                     : std::string())
                 << ">" << xml_escape(categories[i]) << "</text>\n";
  }
  canvas.x_label(label);
}

}  // namespace

BoxStats box_stats(std::vector<double> samples) {
  samples.erase(std::remove_if(samples.begin(), samples.end(), [](double v) { return !finite(v); }),
                samples.end());
  BoxStats s;
  s.count = (long)samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  auto percentile = [&](double p) {
    const double position = p * (samples.size() - 1);
    const size_t i = (size_t)std::floor(position);
    const size_t j = std::min(i + 1, samples.size() - 1);
    return samples[i] + (position - i) * (samples[j] - samples[i]);
  };
  s.low = percentile(0.05);
  s.q1 = percentile(0.25);
  s.median = percentile(0.5);
  s.q3 = percentile(0.75);
  s.high = percentile(0.95);
  return s;
}

std::string svg_line_plot(const LinePlot& plot) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const LineSeries& s : plot.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!finite(s.x[i]) || !finite(s.y[i])) continue;
      if (plot.x.log && s.x[i] <= 0) continue;
      if (plot.y.log && s.y[i] <= 0) continue;
      x_lo = std::min(x_lo, s.x[i]), x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]), y_hi = std::max(y_hi, s.y[i]);
    }
  const bool legend = wants_legend(plot.series.size(), plot.series.empty() ? "" : plot.series[0].label);
  Canvas canvas(plot.title, legend);
  Scale x = scale_for(plot.x, x_lo, x_hi, false);
  Scale y = scale_for(plot.y, y_lo, y_hi, false);
  x.pixel_lo = canvas.left(), x.pixel_hi = canvas.right();
  y.pixel_lo = canvas.bottom(), y.pixel_hi = canvas.top();
  canvas.y_axis(y, plot.y.label);
  canvas.x_numeric_axis(x, plot.x.label);
  for (size_t k = 0; k < plot.series.size(); ++k) {
    const LineSeries& s = plot.series[k];
    std::string d;
    bool pen_down = false;
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!x.accepts(s.x[i]) || !y.accepts(s.y[i])) {
        pen_down = false;
        continue;
      }
      d += (pen_down ? " L" : (d.empty() ? "M" : " M")) + coordinate(x(s.x[i])) + " " +
           coordinate(y(s.y[i]));
      pen_down = true;
    }
    canvas.out() << "<path class=\"series\" d=\"" << d << "\" fill=\"none\" stroke=\""
                 << color_of(k) << "\" stroke-width=\"1.8\"><title>" << xml_escape(s.label)
                 << "</title></path>\n";
  }
  canvas.frame();
  if (legend) {
    std::vector<std::string> labels;
    for (const LineSeries& s : plot.series) labels.push_back(s.label);
    canvas.legend(labels);
  }
  return canvas.finish();
}

std::string svg_bar_plot(const BarPlot& plot) {
  double lo = 0, hi = 0;
  for (const BarSeries& s : plot.series)
    for (double v : s.values)
      if (finite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  const bool legend = wants_legend(plot.series.size(), plot.series.empty() ? "" : plot.series[0].label);
  Canvas canvas(plot.title, legend);
  Scale y = linear_scale(lo, hi, true);
  y.pixel_lo = canvas.bottom(), y.pixel_hi = canvas.top();
  canvas.y_axis(y, plot.y.label);
  x_categorical_axis(canvas, plot.categories, plot.x_label);
  const double slot = (canvas.right() - canvas.left()) / (double)std::max<size_t>(1, plot.categories.size());
  const double bar = slot * 0.8 / (double)std::max<size_t>(1, plot.series.size());
  for (size_t k = 0; k < plot.series.size(); ++k) {
    const BarSeries& s = plot.series[k];
    for (size_t i = 0; i < std::min(s.values.size(), plot.categories.size()); ++i) {
      if (!finite(s.values[i])) continue;
      const double x0 = canvas.left() + slot * i + slot * 0.1 + bar * k;
      const double top = std::min(y(s.values[i]), y(0.0)), bottom = std::max(y(s.values[i]), y(0.0));
      canvas.out() << "<rect class=\"bar\" x=\"" << coordinate(x0) << "\" y=\"" << coordinate(top)
                   << "\" width=\"" << coordinate(bar * 0.92) << "\" height=\""
                   << coordinate(bottom - top) << "\" fill=\"" << color_of(k) << "\"><title>"
                   << xml_escape(s.label) << " " << xml_escape(plot.categories[i]) << ": "
                   << number_text(s.values[i]) << "</title></rect>\n";
    }
  }
  canvas.frame();
  if (legend) {
    std::vector<std::string> labels;
    for (const BarSeries& s : plot.series) labels.push_back(s.label);
    canvas.legend(labels);
  }
  return canvas.finish();
}

std::string svg_box_plot(const BoxPlot& plot) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const BoxSeries& s : plot.series)
    for (const BoxStats& b : s.boxes) {
      if (b.count == 0) continue;
      for (double v : {b.low, b.high})
        if (finite(v) && (!plot.y.log || v > 0)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  const bool legend = wants_legend(plot.series.size(), plot.series.empty() ? "" : plot.series[0].label);
  Canvas canvas(plot.title, legend);
  Scale y = scale_for(plot.y, lo, hi, false);
  y.pixel_lo = canvas.bottom(), y.pixel_hi = canvas.top();
  canvas.y_axis(y, plot.y.label);
  x_categorical_axis(canvas, plot.categories, plot.x_label);
  const double slot = (canvas.right() - canvas.left()) / (double)std::max<size_t>(1, plot.categories.size());
  const double width = slot * 0.8 / (double)std::max<size_t>(1, plot.series.size());
  // On a log axis a quartile ≤ 0 is drawn at the bottom edge.
  auto py = [&](double v) {
    if (!y.accepts(v)) return (double)canvas.bottom();
    return std::clamp(y(v), (double)canvas.top(), (double)canvas.bottom());
  };
  for (size_t k = 0; k < plot.series.size(); ++k) {
    const BoxSeries& s = plot.series[k];
    for (size_t i = 0; i < std::min(s.boxes.size(), plot.categories.size()); ++i) {
      const BoxStats& b = s.boxes[i];
      if (b.count == 0) continue;
      const double x0 = canvas.left() + slot * i + slot * 0.1 + width * k;
      const double xm = x0 + width * 0.46, w = width * 0.92;
      auto& out = canvas.out();
      out << "<line class=\"whisker\" x1=\"" << coordinate(xm) << "\" x2=\"" << coordinate(xm)
          << "\" y1=\"" << coordinate(py(b.low)) << "\" y2=\"" << coordinate(py(b.high))
          << "\" stroke=\"" << color_of(k) << "\"/>\n";
      for (double v : {b.low, b.high})
        out << "<line class=\"cap\" x1=\"" << coordinate(xm - w / 4) << "\" x2=\""
            << coordinate(xm + w / 4) << "\" y1=\"" << coordinate(py(v)) << "\" y2=\""
            << coordinate(py(v)) << "\" stroke=\"" << color_of(k) << "\"/>\n";
      const double top = py(b.q3), bottom = py(b.q1);
      out << "<rect class=\"box\" x=\"" << coordinate(x0) << "\" y=\"" << coordinate(top)
          << "\" width=\"" << coordinate(w) << "\" height=\"" << coordinate(std::max(0.0, bottom - top))
          << "\" fill=\"" << color_of(k) << "\" fill-opacity=\"0.35\" stroke=\"" << color_of(k)
          << "\"><title>" << xml_escape(s.label) << " " << xml_escape(plot.categories[i])
          << ": median " << number_text(b.median) << ", quartiles " << number_text(b.q1) << " – "
          << number_text(b.q3) << ", n = " << b.count << "</title></rect>\n";
      out << "<line class=\"median\" x1=\"" << coordinate(x0) << "\" x2=\"" << coordinate(x0 + w)
          << "\" y1=\"" << coordinate(py(b.median)) << "\" y2=\"" << coordinate(py(b.median))
          << "\" stroke=\"black\" stroke-width=\"1.5\"/>\n";
    }
  }
  canvas.frame();
  if (legend) {
    std::vector<std::string> labels;
    for (const BoxSeries& s : plot.series) labels.push_back(s.label);
    canvas.legend(labels);
  }
  return canvas.finish();
}

}  // namespace golinear::analysis
