// The CUDA entry points the cuda probe hooks (enum ld_cuda_api, bpf/events.h): names for
// reports and dumps, and the symbol each is found by. No libbpf here: analysis uses it too.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ld::trace {

struct CudaEntry {
  uint16_t api;             // enum ld_cuda_api
  uint16_t kind;            // enum ld_cuda_kind: what the call does to the host thread
  bool runtime;             // libcudart (else libcuda, the driver)
  std::string_view symbol;  // the exported function: "cudaStreamSynchronize"
};

// Every hooked entry point, driver first.
const std::vector<CudaEntry>& cuda_entries();
// "cudaStreamSynchronize"; "cuda?" for an api this build does not know.
std::string_view cuda_api_name(uint16_t api);
// "launch", "sync", "memcpy", "alloc"; "?" otherwise.
std::string_view cuda_kind_name(uint16_t kind);

}  // namespace ld::trace
