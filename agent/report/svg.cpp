#include "report/svg.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace ld::report {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence at text[i], 0 when it is not one (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF).
size_t utf8_sequence(std::string_view text, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = at(0);
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    len = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    len = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    len = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > text.size() || at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if (!continuation(at(k))) return 0;
  return len;
}

// Calls emit(ascii_char) for printable ASCII, emit_raw(bytes) for valid multi-byte sequences
// and U+FFFD for everything else.
template <typename Ascii>
std::string sanitize(std::string_view text, Ascii ascii) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) out += kReplacement;
      else ascii(out, static_cast<char>(c));
      ++i;
      continue;
    }
    const size_t len = utf8_sequence(text, i);
    if (len == 0) {
      out += kReplacement;
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string num(double v) { return fmt::format("{:.1f}", v); }

std::string tooltip_element(const std::string& tooltip) {
  return tooltip.empty() ? "" : "<title>" + escape_xml(tooltip) + "</title>";
}

// A shape with an optional tooltip child: `<tag attrs/>` or `<tag attrs><title>..</title></tag>`.
std::string element(const std::string& tag, const std::string& attrs, const std::string& tooltip) {
  if (tooltip.empty()) return "<" + tag + " " + attrs + "/>";
  return "<" + tag + " " + attrs + ">" + tooltip_element(tooltip) + "</" + tag + ">";
}

}  // namespace

std::string escape_xml(std::string_view text) {
  return sanitize(text, [](std::string& out, char c) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  });
}

std::string clean_utf8(std::string_view text) {
  return sanitize(text, [](std::string& out, char c) { out += c; });
}

std::string fit_text(std::string_view text, size_t max_chars, size_t min_chars) {
  // Byte offsets where each code point starts; continuation bytes start none.
  std::vector<size_t> starts;
  for (size_t i = 0; i < text.size(); ++i)
    if (!continuation(static_cast<unsigned char>(text[i]))) starts.push_back(i);
  if (starts.size() <= max_chars) return std::string(text);
  if (max_chars < std::max<size_t>(min_chars, 1)) return "";
  return std::string(text.substr(0, starts[max_chars - 1])) + "\xE2\x80\xA6";  // U+2026
}

double LinearScale::operator()(double v) const {
  if (d1 == d0) return r0;
  return r0 + (v - d0) * (r1 - r0) / (d1 - d0);
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi <= lo || target < 1) return {lo};
  const double raw_step = (hi - lo) / target;
  const int exponent = static_cast<int>(std::floor(std::log10(raw_step)));
  // n * 10^e computed as n / 10^-e for negative e: 6 / 10 is exactly 0.6, 6 * 0.1 is not.
  const auto scaled = [&](double n) {
    return exponent < 0 ? n / std::pow(10.0, -exponent) : n * std::pow(10.0, exponent);
  };
  // The 1-2-5 step whose tick count comes closest to the target.
  double multiple = 1;
  double best_miss = INFINITY;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    const double miss = std::abs((hi - lo) / scaled(m) - target);
    if (miss < best_miss) {
      best_miss = miss;
      multiple = m;
    }
  }
  const double step = scaled(multiple);
  if (!(step > 0) || !std::isfinite(step) || !std::isfinite(lo / step)) return {lo};  // denormal ranges
  std::vector<double> ticks;
  for (auto k = static_cast<long long>(std::ceil(lo / step - 1e-9));
       scaled(k * multiple) <= hi + step * 1e-9 && ticks.size() <= 4 * static_cast<size_t>(target); ++k)
    ticks.push_back(scaled(static_cast<double>(k) * multiple));
  return ticks;
}

std::string tick_label(double value) {
  if (std::abs(value) >= 10'000) return fmt::format("{:g}k", value / 1000.0);
  return fmt::format("{:g}", value);
}

Svg::Svg(int width, int height, const std::string& title) : width_(width), height_(height), title_(title) {}

void Svg::rect(double x, double y, double w, double h, const std::string& fill, const std::string& tooltip) {
  body_ += element("rect",
                   fmt::format("x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"", num(x), num(y),
                               num(std::max(w, 0.0)), num(std::max(h, 0.0)), escape_xml(fill)),
                   tooltip);
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, double width, bool dashed) {
  body_ += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"{}/>", num(x1),
                       num(y1), num(x2), num(y2), escape_xml(stroke), width, dashed ? " stroke-dasharray=\"4 3\"" : "");
}

void Svg::circle(double cx, double cy, double r, const std::string& fill, const std::string& tooltip) {
  body_ +=
      element("circle", fmt::format("cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"", num(cx), num(cy), r, escape_xml(fill)),
              tooltip);
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke, double width) {
  std::string coords;
  for (const auto& [x, y] : points) coords += num(x) + "," + num(y) + " ";
  body_ += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"/>", coords,
                       escape_xml(stroke), width);
}

void Svg::text(double x, double y, const std::string& text, const std::string& anchor, const std::string& css_class) {
  const std::string cls = css_class.empty() ? "" : " class=\"" + escape_xml(css_class) + "\"";
  body_ += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\"{}>{}</text>", num(x), num(y), escape_xml(anchor),
                       cls, escape_xml(text));
}

void Svg::vertical_text(double x, double y, const std::string& text) {
  body_ += fmt::format(
      "<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" class=\"axis\" "
      "transform=\"rotate(-90 {0} {1})\">{2}</text>",
      num(x), num(y), escape_xml(text));
}

void Svg::begin_group(const std::string& tooltip) { body_ += "<g>" + tooltip_element(tooltip); }

void Svg::end_group() { body_ += "</g>"; }

void Svg::x_axis(const PlotArea& area, const LinearScale& x, const std::vector<double>& ticks,
                 const std::string& label) {
  line(area.left, area.bottom(), area.right(), area.bottom(), "#444");
  for (double t : ticks) {
    const double px = x(t);
    if (px < area.left - 0.5 || px > area.right() + 0.5) continue;
    line(px, area.bottom(), px, area.bottom() + 4, "#444");
    text(px, area.bottom() + 16, tick_label(t), "middle", "axis");
  }
  text(area.left + area.width / 2, area.bottom() + 34, label, "middle", "axis");
}

void Svg::y_axis(const PlotArea& area, const LinearScale& y, const std::vector<double>& ticks,
                 const std::string& label) {
  line(area.left, area.top, area.left, area.bottom(), "#444");
  for (double t : ticks) {
    const double py = y(t);
    if (py < area.top - 0.5 || py > area.bottom() + 0.5) continue;
    line(area.left - 4, py, area.left, py, "#444");
    line(area.left, py, area.right(), py, "#e6e6e6");  // grid
    text(area.left - 7, py + 4, tick_label(t), "end", "axis");
  }
  vertical_text(area.left - 42, area.top + area.height / 2, label);
}

std::string Svg::str() const {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {0} {1}\" width=\"{0}\" "
      "height=\"{1}\" role=\"img\" aria-label=\"{2}\">{3}</svg>",
      width_, height_, escape_xml(title_), body_);
}

}  // namespace ld::report
