// What slow tokens ran: the user-space frames (native and Python) of the on-CPU samples of a
// slow token's window against those of the typical token's windows (docs/attribution.md,
// "Frames"). Pure analysis over the evidence store's samples and named stacks.
#pragma once

#include "analysis/evidence.hpp"
#include "model/report.hpp"

namespace ld::analysis {

struct FrameOptions {
  size_t max_frames = 5;      // per outlier (and for the typical token)
  double min_excess = 0.05;   // an outlier's function must run this much more than typically
  uint64_t min_samples = 2;   // a window with fewer samples with frames gets none
  size_t flame_stacks = 200;  // distinct stacks kept in report.outlier_flame (the rest summed)
  size_t flame_depth = 32;    // frames kept of a stack (the innermost)
};

// Fills every outlier's `frames` (the functions it ran beyond a typical token: its share of the
// window's samples minus the typical share, largest first, Python first in a Python process) and
// the typical profile's `frames` (its hottest functions by self share: the innermost Python
// frame where there is one, else the innermost named native frame). The typical windows are the
// TPOT gaps of report.request_rows that are not outliers. Fills report.outlier_flame with the
// folded stacks of every outlier window's samples (each sample once where windows overlap).
// Nothing when the trace has no frames.
void attach_frames(model::Report& report, const EvidenceStore& store, const FrameOptions& options = {});

}  // namespace ld::analysis
