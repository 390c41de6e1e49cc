// What `top` draws: the model's view as lines of text (the full screen), and the lines line
// mode prints when stdout is not a terminal. Pure functions of the view: the tests read them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "live/top_model.hpp"

namespace ld::live {

struct ScreenInfo {
  std::string target;  // "pid 4242 (python3), 1 process followed"
  double elapsed_s = 0;
  uint64_t now_unix_ns = 0;
  std::vector<model::ProbeStatus> probes;
  bool paused = false;
  std::string message;  // the last key's outcome: "trace saved to ..."
};

// The screen: at most `height` lines of at most `width` columns (UTF-8: block characters count
// one column each).
std::vector<std::string> render_screen(const TopView& view, const ScreenInfo& info, int width, int height);

// Line mode: one line per slow token as it gets its cause, and a status line now and then.
std::string slow_token_line(const SlowToken& token);
std::string status_line(const TopView& view, const ScreenInfo& info);

// " ▁▂▃▄▅▆▇█" scaled to the largest value; a blank where 0.
std::string sparkline(const std::vector<double>& values);

}  // namespace ld::live
