// cuda: the targets' CUDA calls (bpf/cuda.bpf.c): kernel launches summed per burst, waits for the
// GPU (stream, event, context and device syncs), synchronous copies and device allocations,
// from uprobes on the driver (libcuda.so*) and the runtime (libcudart.so*) a target maps.
//
// Libraries are found by file name in /proc/PID/maps, in any directory (pip wheels put them
// under site-packages/nvidia/*/lib/), and attached per process: a uretprobe and an entry uprobe
// for each entry point the library exports, the function's enum ld_cuda_api as the cookie.
// Servers dlopen() CUDA (PyTorch at `import torch`), and the runtime dlopen()s the driver at its
// first call, so a process is looked at again through the first 10 s after it is first seen
// (process_search.hpp), and through kRuntimeOnlySearchNs while it maps a runtime without a driver (the first
// CUDA call may come after a model's load). A process with no CUDA costs nothing: nothing is
// attached to it.

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "cuda.skel.h"
#include "cuda_maps.h"
#include "events.h"
#include "host/host_facts.hpp"
#include "probes/elf_symbols.hpp"
#include "probes/libbpf_util.hpp"
#include "probes/library_uprobes.hpp"
#include "probes/probe.hpp"
#include "probes/process_search.hpp"
#include "util/files.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

// Looked at again (process_search.hpp) until then after it is first seen, while it maps a
// runtime without a driver (longer than kSearchForNs).
constexpr uint64_t kRuntimeOnlySearchNs = 60 * util::kNsPerSec;
constexpr size_t kMaxProcs = 256;

// A traced CUDA function: its exported name, its enum ld_cuda_api (the attach cookie) and the
// entry program of its enum ld_cuda_kind. The _ptsz/_ptds names are the per-thread default
// stream variants (code built with --default-stream per-thread); a library exports what it has.
struct EntryPoint {
  const char* symbol;
  uint16_t api;
  uint16_t kind;
};

constexpr EntryPoint kEntryPoints[] = {
    // driver
    {"cuLaunchKernel", LD_CU_LAUNCH_KERNEL, LD_CUDA_LAUNCH},
    {"cuLaunchKernel_ptsz", LD_CU_LAUNCH_KERNEL, LD_CUDA_LAUNCH},
    {"cuLaunchKernelEx", LD_CU_LAUNCH_KERNEL_EX, LD_CUDA_LAUNCH},
    {"cuLaunchKernelEx_ptsz", LD_CU_LAUNCH_KERNEL_EX, LD_CUDA_LAUNCH},
    {"cuLaunchCooperativeKernel", LD_CU_LAUNCH_COOPERATIVE, LD_CUDA_LAUNCH},
    {"cuGraphLaunch", LD_CU_GRAPH_LAUNCH, LD_CUDA_LAUNCH},
    {"cuGraphLaunch_ptsz", LD_CU_GRAPH_LAUNCH, LD_CUDA_LAUNCH},
    {"cuMemcpyHtoDAsync_v2", LD_CU_MEMCPY_ASYNC, LD_CUDA_LAUNCH},
    {"cuMemcpyHtoDAsync_v2_ptsz", LD_CU_MEMCPY_ASYNC, LD_CUDA_LAUNCH},
    {"cuStreamSynchronize", LD_CU_STREAM_SYNCHRONIZE, LD_CUDA_SYNC},
    {"cuStreamSynchronize_ptsz", LD_CU_STREAM_SYNCHRONIZE, LD_CUDA_SYNC},
    {"cuCtxSynchronize", LD_CU_CTX_SYNCHRONIZE, LD_CUDA_SYNC},
    {"cuEventSynchronize", LD_CU_EVENT_SYNCHRONIZE, LD_CUDA_SYNC},
    {"cuMemcpyDtoH_v2", LD_CU_MEMCPY_DTOH, LD_CUDA_MEMCPY},
    {"cuMemcpyDtoH_v2_ptds", LD_CU_MEMCPY_DTOH, LD_CUDA_MEMCPY},
    {"cuMemcpyHtoD_v2", LD_CU_MEMCPY_HTOD, LD_CUDA_MEMCPY},
    {"cuMemcpyHtoD_v2_ptds", LD_CU_MEMCPY_HTOD, LD_CUDA_MEMCPY},
    {"cuMemcpy", LD_CU_MEMCPY, LD_CUDA_MEMCPY},
    {"cuMemcpy_ptds", LD_CU_MEMCPY, LD_CUDA_MEMCPY},
    {"cuMemAlloc_v2", LD_CU_MEM_ALLOC, LD_CUDA_ALLOC},
    {"cuMemFree_v2", LD_CU_MEM_FREE, LD_CUDA_ALLOC},
    // runtime
    {"cudaLaunchKernel", LD_CUDART_LAUNCH_KERNEL, LD_CUDA_LAUNCH},
    {"cudaLaunchKernel_ptsz", LD_CUDART_LAUNCH_KERNEL, LD_CUDA_LAUNCH},
    {"cudaLaunchKernelExC", LD_CUDART_LAUNCH_KERNEL_EXC, LD_CUDA_LAUNCH},
    {"cudaLaunchKernelExC_ptsz", LD_CUDART_LAUNCH_KERNEL_EXC, LD_CUDA_LAUNCH},
    {"cudaGraphLaunch", LD_CUDART_GRAPH_LAUNCH, LD_CUDA_LAUNCH},
    {"cudaGraphLaunch_ptsz", LD_CUDART_GRAPH_LAUNCH, LD_CUDA_LAUNCH},
    {"cudaMemcpyAsync", LD_CUDART_MEMCPY_ASYNC, LD_CUDA_LAUNCH},
    {"cudaMemcpyAsync_ptsz", LD_CUDART_MEMCPY_ASYNC, LD_CUDA_LAUNCH},
    {"cudaStreamSynchronize", LD_CUDART_STREAM_SYNCHRONIZE, LD_CUDA_SYNC},
    {"cudaDeviceSynchronize", LD_CUDART_DEVICE_SYNCHRONIZE, LD_CUDA_SYNC},
    {"cudaEventSynchronize", LD_CUDART_EVENT_SYNCHRONIZE, LD_CUDA_SYNC},
    {"cudaMemcpy", LD_CUDART_MEMCPY, LD_CUDA_MEMCPY},
    {"cudaMemcpy_ptds", LD_CUDART_MEMCPY, LD_CUDA_MEMCPY},
    {"cudaMalloc", LD_CUDART_MALLOC, LD_CUDA_ALLOC},
    {"cudaFree", LD_CUDART_FREE, LD_CUDA_ALLOC},
};

const std::set<std::string>& entry_point_names() {
  static const std::set<std::string> names = entry_point_symbols(kEntryPoints);
  return names;
}

struct Proc : UprobeProc {
  bool has(bool (*which)(const std::string&)) const {
    return std::any_of(libs.begin(), libs.end(), [&](const UprobeLibrary& l) { return which(l.path); });
  }
  // Looked at again until then: longer while the runtime waits for its first call's driver.
  uint64_t search_until() const {
    bool runtime_only = has(is_cuda_runtime) && !has(is_cuda_driver);
    return added_ns + (runtime_only ? kRuntimeOnlySearchNs : kSearchForNs);
  }
};

class CudaProbe : public Probe {
 public:
  CudaProbe() = default;
  CudaProbe(const CudaProbe&) = delete;
  CudaProbe& operator=(const CudaProbe&) = delete;
  ~CudaProbe() override {
    for (auto& [tgid, p] : procs_) detach(p);
  }

  const void* bpf_object_elf(size_t* size) const override { return cuda_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    skel_.reset(cuda_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("cuda", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    if (int err = cuda_bpf__load(skel_.get())) throw_libbpf_error("cuda", "loading", err);
    launches_ = ctx.options.hooks.cuda_launches;
    uint64_t now = host::monotonic_now_ns();
    for (uint32_t tgid : ctx.options.tgids) track(tgid, now);
    if (nothing_found_for_good(procs_, now))
      throw ProbeUnavailable("no CUDA library (libcuda.so / libcudart.so) in the target's mappings");
    if (auto why = every_attach_failed(procs_)) throw ProbeUnavailable(*why);
  }

  void tick(uint64_t now, const EmitFn&) override {
    for (auto& [tgid, p] : procs_) step(p, now);
  }

  void finish(const EmitFn& emit) override { flush_bursts(emit); }

  void add_target(uint32_t tgid) override { track(tgid, host::monotonic_now_ns()); }

  bool attaches_later() const override { return any_searching(procs_); }

  uint64_t user_records() const override { return user_records_; }

  std::string detail() const override {
    // "attached" must not read as hooked when no target mapped CUDA: say so first.
    std::string head = any_library_found(procs_) ? "uprobes on the CUDA driver/runtime entry points"
                                                 : "nothing hooked: no target mapped a CUDA library during the trace";
    if (!launches_) head += " (launches not traced: --cuda-launches off)";
    return per_process_detail(std::move(head), procs_, [&](const Proc& p) { return describe(p); });
  }

 private:
  void track(uint32_t tgid, uint64_t now) {
    if (Proc* p = add_process(procs_, tgid, now, kMaxProcs)) search(*p, now);
  }

  // Attaches the CUDA libraries the process maps that are not attached yet; schedules the
  // next look while the window is open and either library is still missing.
  void search(Proc& p, uint64_t now) {
    const std::string maps = maps_or_gone(p, now);
    if (maps.empty()) return;
    for (const std::string& path : cuda_libraries(maps)) {
      bool known = std::any_of(p.libs.begin(), p.libs.end(), [&](const UprobeLibrary& l) { return l.path == path; });
      if (!known) attach_library(p, path);
    }
    bool complete = p.has(is_cuda_driver) && p.has(is_cuda_runtime);
    p.searching = !complete && now < p.search_until();
    p.next_search_ns = next_look_ns(now, p.searches, p.search_until());
  }

  // Every entry point `path` exports, uretprobe first: a thread entering a function between the
  // two attaches must not leave a call open that no return ends.
  void attach_library(Proc& p, const std::string& path) {
    UprobeLibrary lib;
    lib.path = path;
    std::string file = fmt::format("/proc/{}/root{}", p.tgid, path);
    auto symbols = find_dynamic_symbols(file, entry_point_names());
    std::set<uint64_t> offsets;  // an alias exported twice is attached once
    for (const EntryPoint& ep : kEntryPoints) {
      if (ep.kind == LD_CUDA_LAUNCH && !launches_) continue;
      auto it = symbols.find(ep.symbol);
      if (it == symbols.end() || !offsets.insert(it->second.file_offset).second) continue;
      // Launches get no return probe (counted at entry: bpf/cuda.bpf.c says why).
      bpf_program* ret = ep.kind == LD_CUDA_LAUNCH ? nullptr : skel_->progs.ld_cuda_return;
      if (int err = attach_entry_point(p, file, it->second.file_offset, ep.api, entry_program(ep.kind), ret)) {
        lib.error = fmt::format("uprobe on {} failed: {}", ep.symbol, std::strerror(-err));
        break;
      }
      ++lib.attached;
    }
    if (symbols.empty()) lib.error = "no CUDA entry point exported (not an ELF file?)";
    p.libs.push_back(std::move(lib));
  }

  bpf_program* entry_program(uint16_t kind) const {
    switch (kind) {
      case LD_CUDA_SYNC: return skel_->progs.ld_cuda_sync;
      case LD_CUDA_MEMCPY: return skel_->progs.ld_cuda_memcpy;
      case LD_CUDA_ALLOC: return skel_->progs.ld_cuda_alloc;
      default: return skel_->progs.ld_cuda_launch;
    }
  }

  void step(Proc& p, uint64_t now) {
    if (p.gone) return;
    if (p.searching && now >= p.next_search_ns) search(p, now);
    forget_if_exited(p);
  }

  // Launches still summed in the kernel: one burst record per thread.
  void flush_bursts(const EmitFn& emit) {
    int fd = bpf_map__fd(skel_->maps.ld_cuda_threads);
    for_each_map_key<uint32_t>(fd, [&](uint32_t tid) {
      ld_cuda_thread t{};
      if (bpf_map_lookup_elem(fd, &tid, &t) || !t.burst_count) return;
      ld_cuda_call rec{};
      rec.hdr.type = LD_EV_CUDA;
      rec.hdr.size = sizeof(rec);
      rec.hdr.tgid = t.tgid;
      rec.hdr.tid = tid;
      rec.hdr.ts_ns = t.burst_last_ns;
      rec.start_ns = t.burst_first_ns;
      // dur_ns and ret stay 0: launches are counted at entry only (bpf/cuda.bpf.c).
      rec.count = t.burst_count;
      rec.kind = LD_CUDA_LAUNCH;
      rec.api = t.burst_api;
      emit(rec.hdr, sizeof(rec));
      ++user_records_;
    });
  }

  std::string describe(const Proc& p) const {
    std::string libs = describe_libraries(p);
    if (libs.empty())
      libs = p.searching ? "no CUDA library yet (looked at again for 10 s: servers dlopen it)"
                         : "no CUDA library (libcuda.so / libcudart.so) in its mappings";
    else if (p.searching) libs += fmt::format("; looking for the {} too", p.has(is_cuda_driver) ? "runtime" : "driver");
    return p.gone ? libs + "; exited" : libs;
  }

  SkelPtr<cuda_bpf, cuda_bpf__destroy> skel_;
  std::map<uint32_t, Proc> procs_;
  uint64_t user_records_ = 0;
  bool launches_ = true;
};

}  // namespace

std::unique_ptr<Probe> make_cuda_probe() { return std::make_unique<CudaProbe>(); }

}  // namespace ld::probes
