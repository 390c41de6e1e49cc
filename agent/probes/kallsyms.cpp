#include "probes/kallsyms.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <array>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "events.h"
#include "host/host_facts.hpp"
#include "util/files.hpp"

namespace ld::probes {

namespace {

int g_kallsyms_fd = -1;
std::once_flag g_kallsyms_open;  // sched and perf may start on two threads at once
std::mutex g_stack_maps_mutex;
std::vector<int> g_stack_maps;  // every probe's stack map, named in one pass
// Names found so far (finish() runs on the session's one thread). The first probe to emit its
// stacks names those of every registered map: one pass over the file (~30 ms of the kernel's
// time making it) instead of one per probe.
std::unordered_map<uint64_t, std::string> g_names;

using Stack = std::pair<uint32_t, std::array<uint64_t, LD_KSTACK_MAX_DEPTH>>;

// The stacks in a BPF_MAP_TYPE_STACK_TRACE map, by id. The map holds only stacks our programs
// stored, so every key is one of the ids the records name; iterating the keys saves tracking
// the ids in user space.
std::vector<Stack> read_stacks(int stack_map_fd) {
  std::vector<Stack> stacks;
  // A registered fd outlives its map when a session ends without its probes' finish() (the
  // number may then name another map): read only a stack map of our depth.
  bpf_map_info info{};
  uint32_t info_len = sizeof(info);
  if (bpf_obj_get_info_by_fd(stack_map_fd, &info, &info_len) != 0 || info.type != BPF_MAP_TYPE_STACK_TRACE ||
      info.key_size != sizeof(uint32_t) || info.value_size != sizeof(Stack::second_type))
    return stacks;
  uint32_t key = 0, next = 0;
  uint32_t* prev = nullptr;
  while (bpf_map_get_next_key(stack_map_fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    Stack stack{key, {}};
    if (bpf_map_lookup_elem(stack_map_fd, &key, stack.second.data()) == 0) stacks.push_back(stack);
  }
  return stacks;
}

void add_addresses(const std::vector<Stack>& stacks, std::vector<uint64_t>& addrs) {
  for (const Stack& stack : stacks)
    for (uint64_t ip : stack.second) {
      if (!ip) break;
      if (!g_names.count(ip)) addrs.push_back(ip);
    }
}

// Names every address of `stacks` and of the registered maps that is not named yet.
void name_unnamed(const std::vector<Stack>& stacks) {
  std::vector<uint64_t> addrs;
  add_addresses(stacks, addrs);
  if (addrs.empty()) return;
  {
    std::lock_guard<std::mutex> lock(g_stack_maps_mutex);
    for (int fd : g_stack_maps) add_addresses(read_stacks(fd), addrs);
  }
  const KernelAddressNames names = name_kernel_addresses(std::move(addrs));
  for (uint64_t addr : names.addresses()) g_names.emplace(addr, names.symbolize(addr));
}

}  // namespace

void open_kernel_symbols(int stack_map_fd) {
  std::call_once(g_kallsyms_open, [] { g_kallsyms_fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC); });
  std::lock_guard<std::mutex> lock(g_stack_maps_mutex);
  g_stack_maps.push_back(stack_map_fd);
}

KernelAddressNames name_kernel_addresses(std::vector<uint64_t> addrs) {
  KernelAddressNames names(std::move(addrs));
  if (names.empty()) return names;
  const int own_fd = g_kallsyms_fd < 0 ? open("/proc/kallsyms", O_RDONLY | O_CLOEXEC) : -1;
  const int fd = own_fd >= 0 ? own_fd : g_kallsyms_fd;
  // Streamed: the kernel makes the file as it is read (~5 MB), and only the wanted names stay.
  if (fd >= 0) util::read_pieces(fd, 4096, [&](std::string_view piece) { names.feed(piece); });
  if (own_fd >= 0) close(own_fd);
  names.finish();
  return names;
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
  const std::vector<Stack> stacks = read_stacks(stack_map_fd);
  name_unnamed(stacks);
  constexpr size_t kMax = sizeof(ld_kstack) + LD_KSTACK_MAX_DEPTH * LD_SYM_LEN;
  alignas(8) unsigned char buf[kMax];
  uint64_t emitted = 0;
  const uint64_t now = host::monotonic_now_ns();

  for (const auto& [id, ips] : stacks) {
    std::vector<const std::string*> names;
    for (uint64_t ip : ips) {
      if (!ip) break;
      names.push_back(&g_names.at(ip));
    }
    const uint32_t n = static_cast<uint32_t>(names.size());
    uint32_t first = 0;
    while (first < n && is_tracing_frame(*names[first])) first++;
    while (from_tick && first < n && is_tick_frame(*names[first])) first++;
    const uint32_t depth = n - first;

    std::memset(buf, 0, sizeof(buf));
    auto* rec = reinterpret_cast<ld_kstack*>(buf);
    rec->hdr.type = LD_EV_KSTACK;
    rec->hdr.size = static_cast<uint16_t>(sizeof(ld_kstack) + depth * LD_SYM_LEN);
    rec->hdr.ts_ns = now;
    rec->stack_id = id;
    rec->depth = depth;
    rec->source = source;
    char* frames = reinterpret_cast<char*>(buf + sizeof(ld_kstack));
    for (uint32_t i = 0; i < depth; ++i)
      std::strncpy(frames + i * LD_SYM_LEN, names[first + i]->c_str(), LD_SYM_LEN - 1);
    emit(rec->hdr, rec->hdr.size);
    emitted++;
  }
  std::lock_guard<std::mutex> lock(g_stack_maps_mutex);
  std::erase(g_stack_maps, stack_map_fd);  // named: a later probe's pass need not read it again
  return emitted;
}

}  // namespace ld::probes
