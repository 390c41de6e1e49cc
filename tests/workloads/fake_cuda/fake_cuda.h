// A stand-in for the CUDA driver (libcuda.so.1) and runtime (libcudart.so.12), so that the
// cuda probe's uprobes run for real on a machine without a GPU. Only the entry points the probe
// attaches to exist, with the real C signatures (the x86-64 calling convention is what a uprobe
// reads arguments by: cudaLaunchKernel takes dim3 by value, sizes are size_t, streams, events
// and graphs are opaque pointers).
//
// The simulated GPU is one process-wide timeline, `gpu_free_at` (CLOCK_MONOTONIC, under a
// mutex): the time the GPU will have finished everything queued so far.
//
//   launch   cuLaunchKernel/cuLaunchKernelEx queue gridDimX MICROSECONDS of work
//            (cudaLaunchKernel: gridDim.x), cuGraphLaunch the graph handle's integer value in
//            microseconds, cuMemcpyHtoDAsync_v2 its bytes at 10 GB/s:
//            gpu_free_at = max(now, gpu_free_at) + work. Each launch also costs the calling
//            thread LD_FAKE_CUDA_LAUNCH_US microseconds of CPU (default 5, a busy loop), as a
//            real launch's driver overhead does. Nothing waits for the GPU.
//   sync     cuStreamSynchronize, cuCtxSynchronize, cudaDeviceSynchronize and friends wait
//            until the timeline has drained (every stream is the one timeline);
//            cuEventSynchronize waits until the point cuEventRecord saw (an event never
//            recorded is complete). How the thread waits: LD_FAKE_CUDA_SYNC=spin (default: a
//            busy loop on CPU, as CUDA's default schedule spins) or block (clock_nanosleep, off
//            CPU, as with cudaDeviceScheduleBlockingSync).
//   memcpy   cuMemcpyDtoH_v2/HtoD_v2 (and cudaMemcpy) wait like a sync, then copy at 10 GB/s
//            on CPU (pageable host memory is staged by the calling thread). No byte is touched.
//   alloc    cuMemAlloc_v2/cudaMalloc cost ~50 us of CPU and hand out fake device addresses;
//            cuMemFree_v2/cudaFree synchronise the device first, as the real ones do.
//
// Every call returns 0 (CUDA_SUCCESS / cudaSuccess). Each runtime function calls its driver
// counterpart through the driver's exported symbol (the runtime is linked against the fake
// libcuda, so both are mapped as real ones are): a runtime call is two nested traced calls, and
// the probe must record only the outer one.
#pragma once

#include <stddef.h>

extern "C" {

// Driver API types (cuda.h).
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;  // the _v2 entry points' pointer
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUlaunchAttribute_st CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned int numAttrs;
} CUlaunchConfig;

CUresult cuInit(unsigned int flags);
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra);
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra);
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuStreamSynchronize(CUstream hStream);
CUresult cuCtxSynchronize(void);
CUresult cuEventRecord(CUevent hEvent, CUstream hStream);
CUresult cuEventSynchronize(CUevent hEvent);
CUresult cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount, CUstream hStream);
CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);

// Runtime API types (cuda_runtime_api.h, driver_types.h, vector_types.h).
typedef int cudaError_t;
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;
struct dim3 {
  unsigned int x, y, z;
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                             cudaStream_t stream);
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMalloc(void** devPtr, size_t size);
cudaError_t cudaFree(void* devPtr);

}  // extern "C"
