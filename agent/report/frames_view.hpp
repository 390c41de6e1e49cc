// What the slow tokens ran (model::Outlier::frames): the tables the human formats show, so
// that text, Markdown and HTML say the same (docs/attribution.md, "Frames").
#pragma once

#include <string>

#include "model/report.hpp"
#include "report/report_view.hpp"

namespace ld::report {

// "render_usage_summary (server.py:31) in 9 of 10 slow tokens, 96% of their samples (typical 0%)";
// "" when no outlier has frames.
std::string frames_headline(const model::Report& r);
// A row per slow token with frames (the longest first, at most `max_rows`): the window and its
// first frames with their share and the typical share.
CellTable outlier_frames_table(const model::Report& r, size_t max_rows);
// The typical token's hottest functions (self share).
CellTable typical_frames_table(const model::Report& r);

}  // namespace ld::report
