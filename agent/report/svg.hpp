// Inline SVG for the HTML report: a small element writer, linear scales with readable ticks,
// and plot axes. Every string that reaches the markup goes through escape_xml().
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ld::report {

// Safe for HTML/SVG text and attribute values: & < > " ' escaped, control characters and
// invalid UTF-8 replaced by U+FFFD (process names and ids are arbitrary bytes).
std::string escape_xml(std::string_view text);
// The same text as valid UTF-8 without control characters, not escaped (for Markdown/JSON).
std::string clean_utf8(std::string_view text);

// `text` cut to at most `max_chars` characters (UTF-8 code points), the last one "…" when cut;
// "" when it must be cut and fewer than `min_chars` fit. For labels inside boxes of a known width.
std::string fit_text(std::string_view text, size_t max_chars, size_t min_chars = 3);

// Maps [d0, d1] onto [r0, r1]; a zero-width domain maps everything to r0.
struct LinearScale {
  double d0 = 0, d1 = 1, r0 = 0, r1 = 1;
  double operator()(double v) const;
};

// About `target` round tick values (1, 2, 5 x 10^k steps) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target = 6);
// A tick label: no trailing zeros, thousands kept short ("1.5k").
std::string tick_label(double value);

// The plot area inside an SVG: margins leave room for the axes' labels.
struct PlotArea {
  double left, top, width, height;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
};

class Svg {
 public:
  // `title` is announced by screen readers (role="img", aria-label).
  Svg(int width, int height, const std::string& title);

  // Shapes take an optional tooltip (an SVG <title> child, shown on hover).
  void rect(double x, double y, double w, double h, const std::string& fill, const std::string& tooltip = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1,
            bool dashed = false);
  void circle(double cx, double cy, double r, const std::string& fill, const std::string& tooltip = "");
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke, double width);
  // anchor: start | middle | end; css_class: "", "axis", "note", ...
  void text(double x, double y, const std::string& text, const std::string& anchor = "start",
            const std::string& css_class = "");
  void vertical_text(double x, double y, const std::string& text);  // rotated -90, centred
  // Shapes between these share one tooltip: hovering a label drawn over a box shows the box's.
  void begin_group(const std::string& tooltip);
  void end_group();

  void x_axis(const PlotArea& area, const LinearScale& x, const std::vector<double>& ticks, const std::string& label);
  void y_axis(const PlotArea& area, const LinearScale& y, const std::vector<double>& ticks, const std::string& label);

  std::string str() const;  // the <svg> element

 private:
  int width_, height_;
  std::string title_;
  std::string body_;
};

}  // namespace ld::report
