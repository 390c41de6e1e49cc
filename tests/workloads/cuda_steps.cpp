// cuda_steps: an inference loop's CUDA pattern against the fake CUDA libraries
// (tests/workloads/fake_cuda/fake_cuda.h), loaded with dlopen() as real servers load CUDA.
// After SIGUSR1, on the main thread:
//   --steps K times: --launches N cudaLaunchKernel of --kernel-us U us each, then
//     cudaStreamSynchronize(stream 0x5) (waits ~N*U us);
//   cudaGraphLaunch(graph U) + cudaMemcpyAsync(4 KiB) + cudaEventRecord(event 0x77) +
//     cudaEventSynchronize(event 0x77);
//   cudaMemcpy of --memcpy-bytes B (device to host);
//   cudaMalloc(1 MiB) + cudaFree;
//   --driver-launches D cuLaunchKernel of U us, then cuCtxSynchronize.
// Prints "key value" lines: its tid, the total launch calls, its own timing of each blocking call.
// --lib PATH: the fake libcudart.so.12 (default: $LD_FAKE_CUDART, else the build's);
// --sync spin|block sets LD_FAKE_CUDA_SYNC, --launch-cpu-us LD_FAKE_CUDA_LAUNCH_US;
// --dlopen-after-ms X loads the library X ms after SIGUSR1 instead of before it (a library loaded
// after the probe attached, as `import torch`), --work-delay-ms Y then waits Y ms before the work;
// --bench-ms M instead launches empty kernels for M ms and prints the launch rate.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fake_cuda/fake_cuda.h"
#include "workload.hpp"

#ifndef LD_FAKE_CUDA_DIR
#define LD_FAKE_CUDA_DIR "build/fake_cuda"
#endif

namespace {

struct Options {
  std::string lib;
  int steps = 5;
  int launches = 20;
  unsigned kernel_us = 200;
  size_t memcpy_bytes = 4 << 20;
  int driver_launches = 3;
  int dlopen_after_ms = -1;  // < 0: before SIGUSR1
  int work_delay_ms = 0;
  int bench_ms = 0;
};

// The entry points, looked up in the loaded runtime (and the driver it depends on).
struct Cuda {
  decltype(&cudaLaunchKernel) launch_kernel;
  decltype(&cudaGraphLaunch) graph_launch;
  decltype(&cudaStreamSynchronize) stream_sync;
  decltype(&cudaEventRecord) event_record;
  decltype(&cudaEventSynchronize) event_sync;
  decltype(&cudaMemcpy) memcpy_sync;
  decltype(&cudaMemcpyAsync) memcpy_async;
  decltype(&cudaMalloc) dev_malloc;
  decltype(&cudaFree) dev_free;
  decltype(&cuLaunchKernel) cu_launch_kernel;
  decltype(&cuCtxSynchronize) cu_ctx_sync;
};

[[noreturn]] void usage(const char* why) {
  fprintf(stderr, "cuda_steps: %s\n", why);
  exit(1);
}

Options parse(int argc, char** argv) {
  Options o;
  const char* env = getenv("LD_FAKE_CUDART");
  o.lib = env && *env ? env : LD_FAKE_CUDA_DIR "/libcudart.so.12";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--lib") o.lib = v;
    else if (a == "--steps") o.steps = atoi(v);
    else if (a == "--launches") o.launches = atoi(v);
    else if (a == "--kernel-us") o.kernel_us = unsigned(atoi(v));
    else if (a == "--memcpy-bytes") o.memcpy_bytes = strtoull(v, nullptr, 10);
    else if (a == "--driver-launches") o.driver_launches = atoi(v);
    else if (a == "--dlopen-after-ms") o.dlopen_after_ms = atoi(v);
    else if (a == "--work-delay-ms") o.work_delay_ms = atoi(v);
    else if (a == "--bench-ms") o.bench_ms = atoi(v);
    else if (a == "--launch-cpu-us") setenv("LD_FAKE_CUDA_LAUNCH_US", v, 1);
    else if (a == "--sync") setenv("LD_FAKE_CUDA_SYNC", v, 1);
    else usage(("unknown flag " + a).c_str());
  }
  return o;
}

template <typename F>
void lookup(void* h, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(h, name));
  if (!fn) usage((std::string("no symbol ") + name).c_str());
}

Cuda load(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) usage(dlerror());
  Cuda c{};
  lookup(h, "cudaLaunchKernel", c.launch_kernel);
  lookup(h, "cudaGraphLaunch", c.graph_launch);
  lookup(h, "cudaStreamSynchronize", c.stream_sync);
  lookup(h, "cudaEventRecord", c.event_record);
  lookup(h, "cudaEventSynchronize", c.event_sync);
  lookup(h, "cudaMemcpy", c.memcpy_sync);
  lookup(h, "cudaMemcpyAsync", c.memcpy_async);
  lookup(h, "cudaMalloc", c.dev_malloc);
  lookup(h, "cudaFree", c.dev_free);
  lookup(h, "cuLaunchKernel", c.cu_launch_kernel);
  lookup(h, "cuCtxSynchronize", c.cu_ctx_sync);
  return c;
}

template <typename T>
T* handle(uintptr_t v) {
  return reinterpret_cast<T*>(v);
}

// Runs fn and returns how long it took the calling thread, in ns.
template <typename Fn>
uint64_t timed(Fn&& fn) {
  uint64_t t0 = ld::wl::mono_ns();
  fn();
  return ld::wl::mono_ns() - t0;
}

int run_steps(const Cuda& c, const Options& o) {
  const dim3 grid{o.kernel_us, 1, 1}, block{128, 1, 1};
  const auto stream = handle<CUstream_st>(0x5);
  int launches = 0;
  for (int s = 0; s < o.steps; ++s) {
    for (int i = 0; i < o.launches; ++i, ++launches)
      c.launch_kernel(reinterpret_cast<const void*>(0x1000), grid, block, nullptr, 0, stream);
    printf("step%d_sync_ns %llu\n", s, (unsigned long long)timed([&] { c.stream_sync(stream); }));
  }
  const auto event = handle<CUevent_st>(0x77);
  static char host[4096];
  c.graph_launch(handle<CUgraphExec_st>(o.kernel_us), stream);
  c.memcpy_async(handle<void>(0x700000000000ULL), host, sizeof host, cudaMemcpyHostToDevice, stream);
  launches += 2;
  c.event_record(event, stream);
  printf("event_sync_ns %llu\n", (unsigned long long)timed([&] { c.event_sync(event); }));
  std::vector<char> dst(o.memcpy_bytes);
  uint64_t copy = timed(
      [&] { c.memcpy_sync(dst.data(), handle<void>(0x700000000000ULL), o.memcpy_bytes, cudaMemcpyDeviceToHost); });
  printf("memcpy_bytes %zu\nmemcpy_ns %llu\n", o.memcpy_bytes, (unsigned long long)copy);
  void* p = nullptr;
  uint64_t alloc = timed([&] { c.dev_malloc(&p, 1 << 20); });
  uint64_t freed = timed([&] { c.dev_free(p); });
  printf("alloc_ns %llu\nfree_ns %llu\n", (unsigned long long)alloc, (unsigned long long)freed);
  for (int i = 0; i < o.driver_launches; ++i, ++launches)
    c.cu_launch_kernel(nullptr, o.kernel_us, 1, 1, 128, 1, 1, 0, nullptr, nullptr, nullptr);
  printf("ctx_sync_ns %llu\n", (unsigned long long)timed([&] { c.cu_ctx_sync(); }));
  return launches;
}

// Empty kernels as fast as the host can launch them: the per-call cost of what is attached.
void bench(const Cuda& c, int ms) {
  const dim3 grid{0, 1, 1}, block{1, 1, 1};
  uint64_t end = ld::wl::mono_ns() + uint64_t(ms) * 1000000ULL, n = 0;
  uint64_t t0 = ld::wl::mono_ns();
  while (ld::wl::mono_ns() < end) {
    for (int i = 0; i < 64; ++i, ++n)
      c.launch_kernel(reinterpret_cast<const void*>(0x1000), grid, block, nullptr, 0, nullptr);
  }
  double s = double(ld::wl::mono_ns() - t0) / 1e9;
  printf("bench_launches %llu\nbench_ns_per_launch %llu\n", (unsigned long long)n,
         (unsigned long long)(s * 1e9 / double(n)));
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  Cuda c{};
  if (o.dlopen_after_ms < 0) c = load(o.lib);
  printf("tid %ld\n", (long)syscall(SYS_gettid));
  fflush(stdout);
  ld::wl::wait_for_go();
  if (o.dlopen_after_ms >= 0) {
    usleep(useconds_t(o.dlopen_after_ms) * 1000);
    c = load(o.lib);
  }
  usleep(useconds_t(o.work_delay_ms) * 1000);
  if (o.bench_ms > 0) {
    bench(c, o.bench_ms);
    return 0;
  }
  printf("launch_calls %d\n", run_steps(c, o));
  return 0;
}
