#include "probes/kallsyms.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "events.h"
#include "host/host_facts.hpp"

namespace ld::probes {

namespace {

int g_kallsyms_fd = -1;
std::once_flag g_kallsyms_open;  // sched and perf may start on two threads at once

std::string read_all(int fd) {
  std::string text;
  char chunk[1 << 16];
  ssize_t n;
  while ((n = read(fd, chunk, sizeof(chunk))) > 0) text.append(chunk, size_t(n));
  return text;
}

}  // namespace

void open_kernel_symbols() {
  std::call_once(g_kallsyms_open,
                 [] { g_kallsyms_fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC); });
}

const Kallsyms& kernel_symbols() {
  static const Kallsyms table = [] {
    if (g_kallsyms_fd < 0) return Kallsyms::load();
    std::istringstream in(read_all(g_kallsyms_fd));
    close(g_kallsyms_fd);
    g_kallsyms_fd = -1;
    return Kallsyms::parse(in);
  }();
  return table;
}

namespace {

// The frames of the BPF program and the tracepoint glue that called it (sched_switch's stack
// starts inside our program): not the traced task's code, and they differ between kernels.
bool is_tracing_frame(const std::string& name) {
  for (const char* prefix : {"bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// The scheduler tick's hrtimer interrupt between the tracepoint and the code it interrupted
// (x86-64: hrtimer_interrupt called from the local APIC timer vector).
bool is_tick_frame(const std::string& name) {
  for (const char* prefix : {"__hrtimer_run_queues+", "hrtimer_interrupt+", "__sysvec_apic_timer_interrupt+",
                             "sysvec_apic_timer_interrupt+", "asm_sysvec_apic_timer_interrupt+"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

std::vector<KernelTextRange> find_kernel_text(std::initializer_list<std::string_view> names) {
  std::ifstream in("/proc/kallsyms");
  return find_kernel_text(in, names);
}

uint64_t emit_kernel_stacks(int stack_map_fd, uint32_t source, const EmitFn& emit, bool from_tick) {
  const Kallsyms& syms = kernel_symbols();
  constexpr size_t kMax = sizeof(ld_kstack) + LD_KSTACK_MAX_DEPTH * LD_SYM_LEN;
  alignas(8) unsigned char buf[kMax];
  uint64_t ips[LD_KSTACK_MAX_DEPTH];
  uint64_t emitted = 0;
  uint64_t now = host::monotonic_now_ns();
  uint32_t key = 0, next = 0;
  uint32_t* prev = nullptr;

  // The map holds only stacks our programs stored, so every key is one of the ids the
  // records name; iterating the keys saves tracking the ids in user space.
  while (bpf_map_get_next_key(stack_map_fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    std::memset(ips, 0, sizeof(ips));
    if (bpf_map_lookup_elem(stack_map_fd, &key, ips) != 0) continue;
    uint32_t n = 0, first = 0;
    while (n < LD_KSTACK_MAX_DEPTH && ips[n]) n++;
    std::vector<std::string> names;
    names.reserve(n);
    for (uint32_t i = 0; i < n; ++i) names.push_back(syms.symbolize(ips[i]));
    while (first < n && is_tracing_frame(names[first])) first++;
    while (from_tick && first < n && is_tick_frame(names[first])) first++;
    uint32_t depth = n - first;

    std::memset(buf, 0, sizeof(buf));
    auto* rec = reinterpret_cast<ld_kstack*>(buf);
    rec->hdr.type = LD_EV_KSTACK;
    rec->hdr.size = static_cast<uint16_t>(sizeof(ld_kstack) + depth * LD_SYM_LEN);
    rec->hdr.ts_ns = now;
    rec->stack_id = key;
    rec->depth = depth;
    rec->source = source;
    char* frames = reinterpret_cast<char*>(buf + sizeof(ld_kstack));
    for (uint32_t i = 0; i < depth; ++i)
      std::strncpy(frames + i * LD_SYM_LEN, names[first + i].c_str(), LD_SYM_LEN - 1);
    emit(rec->hdr, rec->hdr.size);
    emitted++;
  }
  return emitted;
}

}  // namespace ld::probes
