#include "trace/cuda_api.hpp"

#include <fmt/format.h>

#include "events.h"
#include "util/time.hpp"

namespace ld::trace {

const char* cuda_api_name(uint16_t api) {
  switch (api) {
    case LD_CU_LAUNCH_KERNEL: return "cuLaunchKernel";
    case LD_CU_LAUNCH_KERNEL_EX: return "cuLaunchKernelEx";
    case LD_CU_LAUNCH_COOPERATIVE: return "cuLaunchCooperativeKernel";
    case LD_CU_GRAPH_LAUNCH: return "cuGraphLaunch";
    case LD_CU_STREAM_SYNCHRONIZE: return "cuStreamSynchronize";
    case LD_CU_CTX_SYNCHRONIZE: return "cuCtxSynchronize";
    case LD_CU_EVENT_SYNCHRONIZE: return "cuEventSynchronize";
    case LD_CU_MEMCPY_DTOH: return "cuMemcpyDtoH";
    case LD_CU_MEMCPY_HTOD: return "cuMemcpyHtoD";
    case LD_CU_MEMCPY: return "cuMemcpy";
    case LD_CU_MEMCPY_ASYNC: return "cuMemcpyHtoDAsync";
    case LD_CU_MEM_ALLOC: return "cuMemAlloc";
    case LD_CU_MEM_FREE: return "cuMemFree";
    case LD_CUDART_LAUNCH_KERNEL: return "cudaLaunchKernel";
    case LD_CUDART_LAUNCH_KERNEL_EXC: return "cudaLaunchKernelExC";
    case LD_CUDART_GRAPH_LAUNCH: return "cudaGraphLaunch";
    case LD_CUDART_STREAM_SYNCHRONIZE: return "cudaStreamSynchronize";
    case LD_CUDART_DEVICE_SYNCHRONIZE: return "cudaDeviceSynchronize";
    case LD_CUDART_EVENT_SYNCHRONIZE: return "cudaEventSynchronize";
    case LD_CUDART_MEMCPY: return "cudaMemcpy";
    case LD_CUDART_MEMCPY_ASYNC: return "cudaMemcpyAsync";
    case LD_CUDART_MALLOC: return "cudaMalloc";
    case LD_CUDART_FREE: return "cudaFree";
    default: return "?";
  }
}

const char* cuda_kind_name(uint16_t kind) {
  switch (kind) {
    case LD_CUDA_LAUNCH: return "launch";
    case LD_CUDA_SYNC: return "sync";
    case LD_CUDA_MEMCPY: return "memcpy";
    case LD_CUDA_ALLOC: return "alloc";
    default: return "?";
  }
}

std::string describe_cuda_call(const ld_cuda_call& c) {
  std::string out = fmt::format("{} {}", cuda_kind_name(c.kind), cuda_api_name(c.api));
  if (c.kind == LD_CUDA_LAUNCH) out += fmt::format(" x{}", c.count);
  out += fmt::format(" {:.3f} ms", util::ns_to_ms(c.dur_ns));
  if (c.kind == LD_CUDA_SYNC && c.arg) {
    bool event = c.api == LD_CU_EVENT_SYNCHRONIZE || c.api == LD_CUDART_EVENT_SYNCHRONIZE;
    out += fmt::format(" {} {:#x}", event ? "event" : "stream", c.arg);
  } else if (c.kind == LD_CUDA_MEMCPY || c.kind == LD_CUDA_ALLOC) {
    out += fmt::format(" {} bytes", c.arg);
  }
  if (c.ret) out += fmt::format(" error {}", c.ret);
  return out;
}

}  // namespace ld::trace
