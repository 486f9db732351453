// Line charts as self-contained SVG files: loss curves and the like, viewable in any browser
// without a plotting library.
#pragma once

#include <string>
#include <vector>

namespace tg {

// One named line: y[i] at x[i]. Points with a NaN or infinite coordinate are left out and break
// the line there.
struct PlotSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;
};

// The chart's text and size in pixels.
struct PlotOptions {
  std::string title;
  std::string x_label = "step";
  std::string y_label;
  int width = 720;
  int height = 440;
};

// The SVG document for `series` (axes with tick labels, a legend, the title); an empty chart when
// no series has a finite point. x and y of a series must have the same length.
std::string render_svg_plot(const std::vector<PlotSeries>& series, const PlotOptions& options = {});

// Writes render_svg_plot(series, options) to `path`; a file that cannot be written is an error
// naming it.
void write_svg_plot(const std::string& path, const std::vector<PlotSeries>& series,
                    const PlotOptions& options = {});

}  // namespace tg
