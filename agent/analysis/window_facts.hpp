// Facts beside the split: what the trace says about the whole recording (TIME_WAIT, listen
// overflows, throttling, frequency, GPUs) and about one slow window (its request, connections,
// the GPU's queue and state then).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "analysis/evidence.hpp"
#include "analysis/outlier_windows.hpp"
#include "model/report.hpp"

namespace ld::analysis {

nlohmann::json window_facts(const EvidenceStore& store, uint64_t start, uint64_t end, uint64_t requests,
                            uint64_t duration_ms);
nlohmann::json outlier_facts(const EvidenceStore& store, const model::Request& r, const Window& w, bool first_request,
                             uint64_t target_start);
// A GPU engine's slow window: how long the GPU had work queued in it and how long it sat idle
// (inferred from the CUDA calls). A window whose time went to the CPU side with the GPU idle
// says so on its top cause: the GPU waited for the host, not the other way round.
void note_gpu_queue(model::Outlier& o, const EvidenceStore& store, uint32_t tgid, uint64_t a, uint64_t b);
// The GPUs' state in the window (the nvml probe's samples).
void note_gpu_state(model::Outlier& o, const EvidenceStore& store, uint64_t a, uint64_t b);

}  // namespace ld::analysis
