// The frames of the slow tokens summed over the outliers (model::Outlier::frames): what the
// rules quote and every format shows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/report.hpp"

namespace ld::model {

// A function named at the head of outliers' frames.
struct TopFrame {
  FrameShare frame;             // as in the first outlier that named it; share: the mean below
  uint64_t outliers = 0;        // outliers whose first frame it is
  double mean_share = 0;        // its share, averaged over those outliers
  uint64_t samples = 0;         // of those outliers' on-CPU samples with frames, the ones in it
  uint64_t window_samples = 0;  // those outliers' on-CPU samples with frames
  std::string kind;             // what kind of code: json | logging | gc | tokenizer | code
};

struct FramesSummary {
  uint64_t outliers_with_frames = 0;  // outliers with some frame named
  std::vector<TopFrame> top;          // most outliers first
};

FramesSummary summarize_frames(const Report& report);

// "json", "logging", "gc", "tokenizer" when the function's name or file says so, else "code".
std::string frame_kind(const FrameShare& f);

// "render_usage_summary (server.py:27)", "ld_wl::slow_detokenize (ld-wl-frames_server)".
std::string frame_label(const FrameShare& f);

}  // namespace ld::model
