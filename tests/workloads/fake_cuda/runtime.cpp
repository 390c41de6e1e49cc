// The fake libcudart.so.12: every call forwards to its driver counterpart through the driver's
// exported symbol, as the real runtime does (semantics: fake_cuda.h). The result is translated
// after the driver returns, so the compiler cannot turn the forward into a tail jump: the
// driver call stays nested inside the runtime's frame, as in the real library.
#include <stdint.h>

#include <atomic>

#include "fake_cuda.h"

namespace {

constexpr cudaError_t kCudaErrorUnknown = 999;

// The runtime initialises the driver lazily, on its first call. cuInit may run twice when two
// threads race here, which it allows; a flag keeps the common path to one load.
std::atomic<bool> g_initialised{false};

void lazy_init() {
  if (g_initialised.load(std::memory_order_acquire)) return;
  cuInit(0);
  g_initialised.store(true, std::memory_order_release);
}

cudaError_t to_cuda_error(CUresult r) { return r == 0 ? 0 : kCudaErrorUnknown; }

// A runtime call that is its driver call.
template <typename... Args>
cudaError_t forward(CUresult (*driver)(Args...), Args... args) {
  lazy_init();
  return to_cuda_error(driver(args...));
}

CUdeviceptr device_ptr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

extern "C" {

cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                             cudaStream_t stream) {
  lazy_init();
  CUfunction f = reinterpret_cast<CUfunction>(const_cast<void*>(func));
  return to_cuda_error(cuLaunchKernel(f, gridDim.x, gridDim.y, gridDim.z, blockDim.x, blockDim.y, blockDim.z,
                                      unsigned(sharedMem), stream, args, nullptr));
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return forward(cuGraphLaunch, graphExec, stream);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) { return forward(cuStreamSynchronize, stream); }

cudaError_t cudaDeviceSynchronize(void) { return forward(cuCtxSynchronize); }

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) { return forward(cuEventRecord, event, stream); }

cudaError_t cudaEventSynchronize(cudaEvent_t event) { return forward(cuEventSynchronize, event); }

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind) {
  lazy_init();
  if (kind == cudaMemcpyHostToDevice) return to_cuda_error(cuMemcpyHtoD_v2(device_ptr(dst), src, count));
  return to_cuda_error(cuMemcpyDtoH_v2(dst, device_ptr(src), count));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  return forward(cuMemcpyHtoDAsync_v2, device_ptr(dst), src, count, stream);
}

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  lazy_init();
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc_v2(&p, size);
  if (devPtr) *devPtr = reinterpret_cast<void*>(uintptr_t(p));
  return to_cuda_error(r);
}

cudaError_t cudaFree(void* devPtr) { return forward(cuMemFree_v2, device_ptr(devPtr)); }

}  // extern "C"
