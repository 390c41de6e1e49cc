// One fixed colour per cause id (interface.md vocabulary), shared by every plot and legend so a
// cause looks the same everywhere. Okabe-Ito and Paul Tol colours: distinguishable with the
// common colour-vision deficiencies; every use also names the cause in text (legend, tooltip),
// so colour is never the only carrier.
#pragma once

#include <string>
#include <vector>

namespace ld::report {

struct CauseStyle {
  const char* id;     // the `cause` field value
  const char* color;  // "#rrggbb"
  const char* label;  // short human name for legends
};

// Every vocabulary cause, in the contract's order (compute and unknown last).
const std::vector<CauseStyle>& cause_styles();
// The cause's colour; a neutral dark grey for ids outside the vocabulary.
std::string cause_color(const std::string& cause);
// The legend label; the id itself for ids outside the vocabulary.
std::string cause_label(const std::string& cause);
// True when dark text reads better than white on the cause's colour.
bool cause_color_is_light(const std::string& cause);
// Position in the vocabulary (unknown ids after every known one): a stable legend order.
size_t cause_rank(const std::string& cause);

}  // namespace ld::report
