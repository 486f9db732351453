#include "io/svg_plot.h"

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "tensor/check.h"

namespace tg {
namespace {

// matplotlib's default colour cycle, so the curves look familiar.
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// Room around the plot area for the title, tick labels and axis labels.
constexpr double kLeft = 72, kRight = 24, kTop = 44, kBottom = 52;

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string px(double v) { return fmt("%.2f", v); }

// One axis: its range, tick positions and how to print them.
struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
  std::string label_format = "%g";

  // Position of v in [0, 1] across the axis; halves keep hi - lo finite even for ranges near DBL_MAX.
  double fraction(double v) const { return (v / 2 - lo / 2) / (hi / 2 - lo / 2); }
};

// 1, 2 or 5 times a power of ten, near `raw`: the steps people read easily.
double nice_step(double raw) {
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
}

// The axis for data in [min, max]: 4% margins so no curve runs along the frame, and ticks at nice
// steps inside. A constant (or empty) range is widened first, so nothing divides by a zero span.
Axis make_axis(double min, double max) {
  if (!(max > min)) {
    const double pad = min != 0 ? std::abs(min) * 0.1 : 1.0;
    min = std::max(min - pad, -DBL_MAX);
    max = std::min(max + pad, DBL_MAX);
  }
  Axis a;
  const double span = max - min;
  if (std::isfinite(span) && span > 0) {
    const double step = nice_step(span / 5);
    const double lo = min - 0.04 * span, hi = max + 0.04 * span;
    const double first = std::ceil(lo / step), last = std::floor(hi / step);
    // Steps too small to change the tick values (a span far below the values' precision) fall through.
    if (step > 0 && std::isfinite(lo) && std::isfinite(hi) && last >= first && last - first <= 20 &&
        first * step + step != first * step) {
      a.lo = lo;
      a.hi = hi;
      for (double i = first; i <= last; ++i) a.ticks.push_back(i == 0 ? 0.0 : i * step);  // i * step: no drift
      const double biggest = std::max(std::abs(min), std::abs(max));
      if (biggest < 1e6 && step >= 1e-4) {
        const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
        a.label_format = "%." + std::to_string(decimals) + "f";
      } else {
        const int digits = static_cast<int>(std::floor(std::log10(biggest)) - std::floor(std::log10(step))) + 1;
        a.label_format = "%." + std::to_string(std::clamp(digits, 2, 17)) + "g";
      }
      return a;
    }
  }
  a.lo = min;
  a.hi = max;
  for (int i = 0; i <= 4; ++i) a.ticks.push_back(min * (1 - i / 4.0) + max * (i / 4.0));  // no overflow near DBL_MAX
  a.label_format = "%.6g";
  return a;
}

bool finite_point(const PlotSeries& s, size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); }

}  // namespace

std::string render_svg_plot(const std::vector<PlotSeries>& series, const PlotOptions& options) {
  TG_CHECK(options.width >= 200 && options.height >= 150, "[render_svg_plot] the chart must be at least 200x150 ",
           "pixels, got ", options.width, "x", options.height);
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  bool any = false;
  for (const PlotSeries& s : series) {
    TG_CHECK(s.x.size() == s.y.size(), "[render_svg_plot] series \"", s.name, "\" has ", s.x.size(),
             " x values but ", s.y.size(), " y values; expected one x per y");
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!finite_point(s, i)) continue;
      any = true;
      xmin = std::min(xmin, s.x[i]);
      xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, s.y[i]);
      ymax = std::max(ymax, s.y[i]);
    }
  }
  if (!any) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  const Axis xa = make_axis(xmin, xmax), ya = make_axis(ymin, ymax);

  const double w = options.width, h = options.height;
  const double plot_w = w - kLeft - kRight, plot_h = h - kTop - kBottom;
  auto sx = [&](double x) { return kLeft + xa.fraction(x) * plot_w; };
  auto sy = [&](double y) { return kTop + (1 - ya.fraction(y)) * plot_h; };

  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(options.width) + "\" height=\"" +
       std::to_string(options.height) + "\" viewBox=\"0 0 " + std::to_string(options.width) + " " +
       std::to_string(options.height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!options.title.empty())
    o += "<text x=\"" + px(w / 2) + "\" y=\"26\" text-anchor=\"middle\" font-size=\"16\">" +
         escape_xml(options.title) + "</text>\n";

  // Grid lines and tick labels.
  for (double t : xa.ticks) {
    const double x = sx(t);
    o += "<line x1=\"" + px(x) + "\" y1=\"" + px(kTop) + "\" x2=\"" + px(x) + "\" y2=\"" + px(kTop + plot_h) +
         "\" stroke=\"#e0e0e0\"/>\n";
    o += "<text x=\"" + px(x) + "\" y=\"" + px(kTop + plot_h + 16) + "\" text-anchor=\"middle\">" +
         fmt(xa.label_format.c_str(), t) + "</text>\n";
  }
  for (double t : ya.ticks) {
    const double y = sy(t);
    o += "<line x1=\"" + px(kLeft) + "\" y1=\"" + px(y) + "\" x2=\"" + px(kLeft + plot_w) + "\" y2=\"" + px(y) +
         "\" stroke=\"#e0e0e0\"/>\n";
    o += "<text x=\"" + px(kLeft - 6) + "\" y=\"" + px(y + 4) + "\" text-anchor=\"end\">" +
         fmt(ya.label_format.c_str(), t) + "</text>\n";
  }
  o += "<rect x=\"" + px(kLeft) + "\" y=\"" + px(kTop) + "\" width=\"" + px(plot_w) + "\" height=\"" + px(plot_h) +
       "\" fill=\"none\" stroke=\"black\"/>\n";
  if (!options.x_label.empty())
    o += "<text x=\"" + px(kLeft + plot_w / 2) + "\" y=\"" + px(h - 10) + "\" text-anchor=\"middle\">" +
         escape_xml(options.x_label) + "</text>\n";
  if (!options.y_label.empty())
    o += "<text transform=\"translate(16 " + px(kTop + plot_h / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
         escape_xml(options.y_label) + "</text>\n";
  if (!any)
    o += "<text x=\"" + px(kLeft + plot_w / 2) + "\" y=\"" + px(kTop + plot_h / 2) +
         "\" text-anchor=\"middle\" fill=\"#808080\">no data</text>\n";

  // The curves: one polyline per run of finite points; a lone point is a dot, since a one-point
  // polyline draws nothing.
  for (size_t k = 0; k < series.size(); ++k) {
    const PlotSeries& s = series[k];
    const std::string color = kColors[k % std::size(kColors)];
    size_t i = 0;
    while (i < s.x.size()) {
      if (!finite_point(s, i)) {
        ++i;
        continue;
      }
      size_t end = i;
      while (end < s.x.size() && finite_point(s, end)) ++end;
      if (end - i == 1) {
        o += "<circle cx=\"" + px(sx(s.x[i])) + "\" cy=\"" + px(sy(s.y[i])) + "\" r=\"3\" fill=\"" + color + "\"/>\n";
      } else {
        o += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" points=\"";
        for (size_t j = i; j < end; ++j) {
          if (j != i) o += ' ';
          o += px(sx(s.x[j])) + "," + px(sy(s.y[j]));
        }
        o += "\"/>\n";
      }
      i = end;
    }
  }

  // Legend in the plot's top-right corner, over a translucent box.
  if (!series.empty()) {
    size_t longest = 0;
    for (const PlotSeries& s : series) longest = std::max(longest, s.name.size());
    const double box_w = 36 + 7.0 * static_cast<double>(longest), box_h = 8 + 18.0 * static_cast<double>(series.size());
    const double bx = kLeft + plot_w - box_w - 8, by = kTop + 8;
    o += "<rect x=\"" + px(bx) + "\" y=\"" + px(by) + "\" width=\"" + px(box_w) + "\" height=\"" + px(box_h) +
         "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#b0b0b0\"/>\n";
    for (size_t k = 0; k < series.size(); ++k) {
      const double y = by + 15 + 18.0 * static_cast<double>(k);
      o += "<line x1=\"" + px(bx + 6) + "\" y1=\"" + px(y - 4) + "\" x2=\"" + px(bx + 26) + "\" y2=\"" + px(y - 4) +
           "\" stroke=\"" + kColors[k % std::size(kColors)] + "\" stroke-width=\"2\"/>\n";
      o += "<text x=\"" + px(bx + 30) + "\" y=\"" + px(y) + "\">" + escape_xml(series[k].name) + "</text>\n";
    }
  }
  o += "</svg>\n";
  return o;
}

void write_svg_plot(const std::string& path, const std::vector<PlotSeries>& series, const PlotOptions& options) {
  const std::string svg = render_svg_plot(series, options);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  TG_CHECK(out.is_open(), "[write_svg_plot] cannot open '", path, "' for writing: ", std::strerror(errno));
  out.write(svg.data(), static_cast<std::streamsize>(svg.size()));
  out.flush();
  TG_CHECK(out.good(), "[write_svg_plot] writing '", path, "' failed: ", std::strerror(errno));
}

}  // namespace tg
