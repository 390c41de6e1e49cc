#include "report/palette.hpp"

namespace ld::report {

const std::vector<CauseStyle>& cause_styles() {
  // Saturated colours for the causes a remedy can remove; greys for the normal cost of a
  // token (compute) and for what no probe explains (unknown), so anomalies stand out.
  static const std::vector<CauseStyle> styles{
      {"kv_alloc", "#E69F00", "memory allocation (KV cache)"},
      {"cpu_frequency", "#F0E442", "CPU frequency"},
      {"gil", "#CC79A7", "GIL wait"},
      {"disk_io", "#D55E00", "disk IO"},
      {"time_wait", "#56B4E9", "TCP connection churn"},
      {"cpu_contention", "#0072B2", "CPU contention"},
      {"cgroup_throttle", "#332288", "cgroup throttling"},
      {"lock_contention", "#882255", "lock contention"},
      {"swap_reclaim", "#999933", "reclaim / swap"},
      {"network", "#009E73", "network"},
      {"app_wait", "#88CCEE", "idle by choice (sleep, batch wait)"},
      {"cold_start", "#44AA99", "cold start"},
      {"compute", "#8C8C8C", "compute (normal work)"},
      {"unknown", "#D9D9D9", "unexplained"},
  };
  return styles;
}

size_t cause_rank(const std::string& cause) {
  const auto& styles = cause_styles();
  for (size_t i = 0; i < styles.size(); ++i)
    if (cause == styles[i].id) return i;
  return styles.size();
}

std::string cause_color(const std::string& cause) {
  const size_t rank = cause_rank(cause);
  return rank < cause_styles().size() ? cause_styles()[rank].color : "#555555";
}

bool cause_color_is_light(const std::string& cause) {
  const std::string hex = cause_color(cause);
  const auto channel = [&](size_t at) { return std::stoi(hex.substr(at, 2), nullptr, 16) / 255.0; };
  // Relative luminance (sRGB weights, without gamma: close enough to choose a text colour).
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5) > 0.55;
}

std::string cause_label(const std::string& cause) {
  const size_t rank = cause_rank(cause);
  return rank < cause_styles().size() ? cause_styles()[rank].label : cause;
}

}  // namespace ld::report
