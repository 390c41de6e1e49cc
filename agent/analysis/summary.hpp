// The report's summary from a token timeline: requests, TTFT and TPOT distributions, the
// counts over the perception thresholds. The attribution (attribution.hpp) fills the rest.
#pragma once

#include <cstdint>

#include "model/report.hpp"
#include "model/timeline.hpp"

namespace ld::analysis {

// realtime_minus_monotonic_ns converts the timeline's monotonic times to unix times.
model::Report build_report(const model::Timeline& timeline, const model::Target& target, uint64_t window_start_mono_ns,
                           uint64_t window_end_mono_ns, int64_t realtime_minus_monotonic_ns,
                           const model::Thresholds& thresholds = {});

}  // namespace ld::analysis
