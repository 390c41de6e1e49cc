#include "trace/cuda_api.hpp"

#include "events.h"

namespace ld::trace {

const std::vector<CudaEntry>& cuda_entries() {
  static const std::vector<CudaEntry> entries{
      {LD_CU_LAUNCH_KERNEL, LD_CUDA_LAUNCH, false, "cuLaunchKernel"},
      {LD_CU_LAUNCH_KERNEL_EX, LD_CUDA_LAUNCH, false, "cuLaunchKernelEx"},
      {LD_CU_LAUNCH_COOPERATIVE, LD_CUDA_LAUNCH, false, "cuLaunchCooperativeKernel"},
      {LD_CU_GRAPH_LAUNCH, LD_CUDA_LAUNCH, false, "cuGraphLaunch"},
      {LD_CU_STREAM_SYNCHRONIZE, LD_CUDA_SYNC, false, "cuStreamSynchronize"},
      {LD_CU_CTX_SYNCHRONIZE, LD_CUDA_SYNC, false, "cuCtxSynchronize"},
      {LD_CU_EVENT_SYNCHRONIZE, LD_CUDA_SYNC, false, "cuEventSynchronize"},
      {LD_CU_MEMCPY_DTOH, LD_CUDA_MEMCPY, false, "cuMemcpyDtoH_v2"},
      {LD_CU_MEMCPY_HTOD, LD_CUDA_MEMCPY, false, "cuMemcpyHtoD_v2"},
      {LD_CU_MEMCPY, LD_CUDA_MEMCPY, false, "cuMemcpy"},
      {LD_CU_MEMCPY_ASYNC, LD_CUDA_LAUNCH, false, "cuMemcpyAsync"},
      {LD_CU_MEM_ALLOC, LD_CUDA_ALLOC, false, "cuMemAlloc_v2"},
      {LD_CU_MEM_FREE, LD_CUDA_ALLOC, false, "cuMemFree_v2"},
      {LD_CUDART_LAUNCH_KERNEL, LD_CUDA_LAUNCH, true, "cudaLaunchKernel"},
      {LD_CUDART_LAUNCH_KERNEL_EXC, LD_CUDA_LAUNCH, true, "cudaLaunchKernelExC"},
      {LD_CUDART_GRAPH_LAUNCH, LD_CUDA_LAUNCH, true, "cudaGraphLaunch"},
      {LD_CUDART_STREAM_SYNCHRONIZE, LD_CUDA_SYNC, true, "cudaStreamSynchronize"},
      {LD_CUDART_DEVICE_SYNCHRONIZE, LD_CUDA_SYNC, true, "cudaDeviceSynchronize"},
      {LD_CUDART_EVENT_SYNCHRONIZE, LD_CUDA_SYNC, true, "cudaEventSynchronize"},
      {LD_CUDART_MEMCPY, LD_CUDA_MEMCPY, true, "cudaMemcpy"},
      {LD_CUDART_MEMCPY_ASYNC, LD_CUDA_LAUNCH, true, "cudaMemcpyAsync"},
      {LD_CUDART_MALLOC, LD_CUDA_ALLOC, true, "cudaMalloc"},
      {LD_CUDART_FREE, LD_CUDA_ALLOC, true, "cudaFree"},
  };
  return entries;
}

std::string_view cuda_api_name(uint16_t api) {
  for (const CudaEntry& e : cuda_entries())
    if (e.api == api) return e.symbol;
  return "cuda?";
}

std::string_view cuda_kind_name(uint16_t kind) {
  switch (kind) {
    case LD_CUDA_LAUNCH: return "launch";
    case LD_CUDA_SYNC: return "sync";
    case LD_CUDA_MEMCPY: return "memcpy";
    case LD_CUDA_ALLOC: return "alloc";
    default: return "?";
  }
}

}  // namespace ld::trace
