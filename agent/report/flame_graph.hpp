// The flame graph of the outliers' samples (model::FlameProfile) for the HTML report: the folded
// stacks merged into a call tree and drawn as an icicle in inline SVG (no script, no fonts or
// images from elsewhere). docs/attribution.md, "Frames".
#pragma once

#include <cstddef>
#include <string>

#include "model/report.hpp"

namespace ld::report {

struct FlameGraph {
  std::string svg;     // the <svg> element; "" for an empty profile
  size_t boxes = 0;    // boxes drawn: the root ("all") and one per call tree node kept
  size_t dropped = 0;  // call tree nodes left out, narrower than kMinBoxShare of the width
  size_t depth = 0;    // rows below the root
};

inline constexpr double kMinBoxShare = 0.005;

// The root ("all samples") at the top, each row one call deeper, each box as wide as its share
// of the samples (siblings by samples, most first). A box has a tooltip "label — N samples
// (P%)" and its label inside when the label fits (cut with "…" when it partly does). Colours
// are fixed per function: warm for native code, blue for Python; grey for "[unknown]" and
// "[other stacks]".
FlameGraph flame_graph(const model::FlameProfile& flame, int width);

}  // namespace ld::report
