// Names of the cuda probe's records (struct ld_cuda_call, bpf/events.h): the CUDA function
// (enum ld_cuda_api) and what it did to the host thread (enum ld_cuda_kind). In the trace layer,
// beside the records, so that the probe, the analysis and the CLI name them alike; no libbpf.
#pragma once

#include <cstdint>
#include <string>

struct ld_cuda_call;

namespace ld::trace {

// "cudaStreamSynchronize", "cuLaunchKernel", ...; "?" for an id this version does not know.
const char* cuda_api_name(uint16_t api);
// "launch", "sync", "memcpy", "alloc"; "?" otherwise.
const char* cuda_kind_name(uint16_t kind);
// One line: kind, function, time in the call(s), count and argument, e.g.
// "sync cudaStreamSynchronize 3.905 ms stream 0x5" or "launch cudaLaunchKernel x20 0.412 ms".
std::string describe_cuda_call(const ld_cuda_call& call);

}  // namespace ld::trace
