#include "audit/cpu_list.hpp"

#include <algorithm>
#include <charconv>

namespace ld::audit {
namespace {

// Guards against "0-4000000000" allocating a huge vector.
constexpr int kMaxCpu = 1 << 16;

std::optional<int> to_int(std::string_view s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > kMaxCpu) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::vector<int>> parse_cpu_list(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::vector<int> out;
  while (!text.empty()) {
    auto comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    auto dash = part.find('-');
    auto lo = to_int(part.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : to_int(part.substr(dash + 1));
    if (!lo || !hi || *hi < *lo) return std::nullopt;
    for (int c = *lo; c <= *hi; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ld::audit
