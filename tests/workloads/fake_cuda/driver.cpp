// The fake libcuda.so.1: a simulated GPU timeline (semantics: fake_cuda.h).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mutex>
#include <unordered_map>

#include "fake_cuda.h"

namespace {

constexpr uint64_t kBytesPerUs = 10000;  // 10 GB/s
constexpr uint64_t kAllocUs = 50;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  return v && *v ? strtoull(v, nullptr, 10) : fallback;
}

bool sync_blocks() {
  static const bool block = [] {
    const char* v = getenv("LD_FAKE_CUDA_SYNC");
    return v && strcmp(v, "block") == 0;
  }();
  return block;
}

uint64_t launch_cpu_us() {
  static const uint64_t us = env_u64("LD_FAKE_CUDA_LAUNCH_US", 5);
  return us;
}

// On CPU until `deadline` (clock_gettime is a vDSO call: no syscall, no sleep).
void spin_until(uint64_t deadline) {
  while (now_ns() < deadline) {
  }
}

void sleep_until(uint64_t deadline) {
  timespec ts{time_t(deadline / 1000000000ULL), long(deadline % 1000000000ULL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

// The GPU: when it will be idle, and the points events were recorded at.
struct Timeline {
  std::mutex mu;
  uint64_t gpu_free_at = 0;
  std::unordered_map<CUevent, uint64_t> events;
  CUdeviceptr next_ptr = 0x700000000000ULL;
};

Timeline& gpu() {
  static Timeline t;
  return t;
}

void queue_work(uint64_t work_ns) {
  Timeline& t = gpu();
  std::lock_guard<std::mutex> lock(t.mu);
  uint64_t now = now_ns();
  t.gpu_free_at = (t.gpu_free_at > now ? t.gpu_free_at : now) + work_ns;
}

// What a launch costs the host thread, then the work queued behind what is there.
void launch(uint64_t work_us) {
  spin_until(now_ns() + launch_cpu_us() * 1000);
  queue_work(work_us * 1000);
}

uint64_t drained_at() {
  Timeline& t = gpu();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.gpu_free_at;
}

void wait_for(uint64_t point) {
  if (sync_blocks()) sleep_until(point);
  else spin_until(point);
}

void copy_sync(size_t bytes) {
  wait_for(drained_at());
  spin_until(now_ns() + bytes * 1000 / kBytesPerUs);
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int) { return 0; }

CUresult cuLaunchKernel(CUfunction, unsigned int gridDimX, unsigned int, unsigned int, unsigned int, unsigned int,
                        unsigned int, unsigned int, CUstream, void**, void**) {
  launch(gridDimX);
  return 0;
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction, void**, void**) {
  launch(config ? config->gridDimX : 0);
  return 0;
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream) {
  launch(reinterpret_cast<uintptr_t>(hGraphExec));
  return 0;
}

CUresult cuStreamSynchronize(CUstream) {
  wait_for(drained_at());
  return 0;
}

CUresult cuCtxSynchronize(void) {
  wait_for(drained_at());
  return 0;
}

CUresult cuEventRecord(CUevent hEvent, CUstream) {
  Timeline& t = gpu();
  std::lock_guard<std::mutex> lock(t.mu);
  uint64_t now = now_ns();
  t.events[hEvent] = t.gpu_free_at > now ? t.gpu_free_at : now;
  return 0;
}

CUresult cuEventSynchronize(CUevent hEvent) {
  uint64_t point = 0;
  {
    Timeline& t = gpu();
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.events.find(hEvent);
    if (it != t.events.end()) point = it->second;
  }
  wait_for(point);
  return 0;
}

CUresult cuMemcpyDtoH_v2(void*, CUdeviceptr, size_t ByteCount) {
  copy_sync(ByteCount);
  return 0;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void*, size_t ByteCount) {
  copy_sync(ByteCount);
  return 0;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void*, size_t ByteCount, CUstream) {
  spin_until(now_ns() + launch_cpu_us() * 1000);
  queue_work(ByteCount * 1000 / kBytesPerUs);
  return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  spin_until(now_ns() + kAllocUs * 1000);
  Timeline& t = gpu();
  std::lock_guard<std::mutex> lock(t.mu);
  if (dptr) *dptr = t.next_ptr;
  t.next_ptr += (bytesize + 4095) & ~size_t(4095);
  return 0;
}

CUresult cuMemFree_v2(CUdeviceptr) {
  wait_for(drained_at());
  spin_until(now_ns() + kAllocUs * 1000);
  return 0;
}

}  // extern "C"
