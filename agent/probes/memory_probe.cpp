// memory: mmap/munmap/brk/mremap/madvise times of the targets and their user page faults,
// batched in the kernel (bpf/memory.bpf.c).
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <string>
#include <vector>

#include "events.h"
#include "memory.skel.h"
#include "memory_maps.h"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

// Defaults of the rodata knobs (see bpf/memory.bpf.c).
constexpr uint64_t kMinBytes = 1u << 20;               // itemise mappings of 1 MiB or more
constexpr uint64_t kMinNs = 100 * util::kNsPerUs;      // ... or calls of 100 us or more
constexpr uint64_t kAggNs = 10 * util::kNsPerMs;       // small calls summed per 10 ms per thread
constexpr uint32_t kFaultBatch = 256;                  // faults per ld_faults record, at most
constexpr uint64_t kFaultSpanNs = 5 * util::kNsPerMs;  // a fault batch spans < 5 ms

// Every (tid, value) of a hash map keyed by tid.
template <typename V>
std::vector<std::pair<uint32_t, V>> dump_map(int fd) {
  std::vector<std::pair<uint32_t, V>> out;
  uint32_t key = 0, next = 0;
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    V value{};
    if (bpf_map_lookup_elem(fd, &next, &value) == 0) out.emplace_back(next, value);
    key = next;
    prev = &key;
  }
  return out;
}

class MemoryProbe : public Probe {
 public:
  const void* bpf_object_elf(size_t* size) const override { return memory_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    skel_.reset(memory_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("memory", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    skel_->rodata->ld_mem_min_bytes = kMinBytes;
    skel_->rodata->ld_mem_min_ns = kMinNs;
    skel_->rodata->ld_mem_agg_ns = kAggNs;
    skel_->rodata->ld_fault_batch = kFaultBatch;
    skel_->rodata->ld_fault_span_ns = kFaultSpanNs;
    // exceptions/page_fault_user is x86-only: elsewhere keep the syscall part.
    faults_ = tracepoint_exists("exceptions", "page_fault_user");
    if (!faults_) bpf_program__set_autoload(skel_->progs.ld_page_fault_user, false);
    if (int err = memory_bpf__load(skel_.get())) throw_libbpf_error("memory", "loading", err);
    if (int err = memory_bpf__attach(skel_.get())) throw_libbpf_error("memory", "attaching", err);
  }

  // Open fault batches and small-call aggregates of threads still alive: the kernel emits
  // them at the next fault / call or at thread exit, neither of which may come now.
  void finish(const EmitFn& emit) override {
    if (!skel_) return;
    for (const auto& [tid, b] : dump_map<ld_fault_acc>(bpf_map__fd(skel_->maps.ld_fault_acc))) {
      if (!b.count) continue;
      ld_faults rec{};
      fill_hdr(rec.hdr, LD_EV_FAULTS, sizeof(rec), b.tgid, tid, b.last_ns);
      rec.first_ns = b.first_ns;
      rec.count = b.count;
      emit(rec.hdr, sizeof(rec));
      user_records_++;
    }
    for (const auto& [tid, a] : dump_map<ld_mem_agg>(bpf_map__fd(skel_->maps.ld_mem_agg))) {
      if (!a.calls) continue;
      ld_syscall rec{};
      fill_hdr(rec.hdr, LD_EV_SYSCALL, sizeof(rec), a.tgid, tid, a.last_ns);
      rec.start_ns = a.start_ns;
      rec.dur_ns = a.dur_ns;
      rec.ret = static_cast<int64_t>(a.failed);
      rec.arg0 = a.calls;
      rec.arg1 = a.bytes;
      rec.kind = LD_SYS_MEM_AGG;
      emit(rec.hdr, sizeof(rec));
      user_records_++;
    }
  }

  uint64_t user_records() const override { return user_records_; }

  std::string detail() const override {
    std::string d =
        "mmap/munmap/brk/mremap/madvise syscall tracepoints (>= 1 MiB or >= 100 us "
        "itemised, the rest summed per thread per 10 ms)";
    d += faults_ ? "; user page faults via exceptions/page_fault_user, batched per thread "
                   "(256 faults or 5 ms)"
                 : "; no page faults: this kernel has no exceptions/page_fault_user tracepoint";
    return d;
  }

 private:
  static void fill_hdr(ld_hdr& h, uint16_t type, size_t size, uint32_t tgid, uint32_t tid, uint64_t ts) {
    h.type = type;
    h.size = static_cast<uint16_t>(size);
    h.cpu = 0;  // flushed from user space: no CPU
    h.tgid = tgid;
    h.tid = tid;
    h.ts_ns = ts;
  }

  SkelPtr<memory_bpf, memory_bpf__destroy> skel_;
  bool faults_ = false;
  uint64_t user_records_ = 0;
};

}  // namespace

std::unique_ptr<Probe> make_memory_probe() { return std::make_unique<MemoryProbe>(); }

}  // namespace ld::probes
