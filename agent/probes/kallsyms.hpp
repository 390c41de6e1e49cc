// Kernel symbols from /proc/kallsyms, and the ld_kstack records made from a probe's stack map.
//
// KernelAddressNames and find_kernel_text's parser are header-only (no libbpf) so that the unit
// tier can test them on a fake file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <istream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "probes/probe.hpp"

namespace ld::probes {

// Names for a set of kernel addresses ("func+0x1a", "func+0x1a [mod]" for module code), found
// in one pass over a text in /proc/kallsyms format without keeping its table: the file is
// ~120k lines (5 MB), a stack map holds a few hundred distinct addresses, and building,
// sorting and keeping the whole table cost the agent ~100 ms of CPU at every stop.
//
// Each text symbol (t/T/w/W) goes to the lowest wanted address at or above it, where it stays
// if it is the highest seen so far there; an address's symbol is then the highest of those of
// its own and all lower wanted addresses (the highest symbol at or below it). The file may
// come in any order (module areas are not sorted) and in pieces that split lines.
class KernelAddressNames {
 public:
  explicit KernelAddressNames(std::vector<uint64_t> addrs) : addrs_(std::move(addrs)) {
    std::sort(addrs_.begin(), addrs_.end());
    addrs_.erase(std::unique(addrs_.begin(), addrs_.end()), addrs_.end());
    best_.resize(addrs_.size());
  }

  bool empty() const { return addrs_.empty(); }
  const std::vector<uint64_t>& addresses() const { return addrs_; }
  // Text symbols read (hidden all-zero addresses, data and padding symbols are not).
  size_t symbols_seen() const { return symbols_seen_; }

  // The next piece of the text; a line it ends in the middle of is completed by the next one.
  void feed(std::string_view text) {
    while (!text.empty()) {
      const size_t newline = text.find('\n');
      if (newline == std::string_view::npos) {
        partial_.append(text);
        return;
      }
      if (partial_.empty()) {
        add_line(text.substr(0, newline));
      } else {
        partial_.append(text.substr(0, newline));
        add_line(partial_);
        partial_.clear();
      }
      text.remove_prefix(newline + 1);
    }
  }

  // After the last piece: every wanted address gets its symbol.
  void finish() {
    if (!partial_.empty()) add_line(partial_);
    partial_.clear();
    // A symbol kept at i is above every address below addrs_[i], so above those kept lower.
    for (size_t i = 1; i < best_.size(); ++i)
      if (!best_[i].addr) best_[i] = best_[i - 1];
  }

  // The name of a wanted address (after finish()); "0xffffffff81234567" when no symbol is at or
  // below it within a function's length, or it was not one of the wanted addresses.
  std::string symbolize(uint64_t addr) const {
    char buf[32];
    const auto it = std::lower_bound(addrs_.begin(), addrs_.end(), addr);
    const Symbol* sym = it != addrs_.end() && *it == addr ? &best_[size_t(it - addrs_.begin())] : nullptr;
    // Past the last symbol by more than any function is long: not kernel text we know.
    if (!sym || !sym->addr || addr - sym->addr > kMaxFunctionBytes) {
      std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(addr));
      return buf;
    }
    std::snprintf(buf, sizeof(buf), "+0x%llx", static_cast<unsigned long long>(addr - sym->addr));
    if (sym->module.empty()) return sym->name + buf;
    return sym->name + buf + " " + sym->module;
  }

 private:
  static constexpr uint64_t kMaxFunctionBytes = 1 << 20;

  struct Symbol {
    uint64_t addr = 0;  // 0: none yet
    std::string name;
    std::string module;  // "[mod]", or empty for the core kernel
  };

  void add_line(std::string_view line) {
    // "<hex addr> <type> <name>[\t[module]]"
    const size_t sp1 = line.find(' ');
    if (sp1 == std::string_view::npos || sp1 == 0 || sp1 > 16) return;
    uint64_t addr = 0;
    for (char c : line.substr(0, sp1)) {
      const int digit = hex_digit(c);
      if (digit < 0) return;
      addr = addr << 4 | uint64_t(digit);
    }
    // All-zero: kptr_restrict hides addresses from this reader.
    if (addr == 0 || line.size() < sp1 + 4 || line[sp1 + 2] != ' ') return;
    const char type = line[sp1 + 1];
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') return;
    const std::string_view rest = line.substr(sp1 + 3);
    // Not find_first_of("\t "): it runs a memchr over the two characters for every one of the
    // name's, ~15% of a pass.
    size_t tab = 0;
    while (tab < rest.size() && rest[tab] != '\t' && rest[tab] != ' ') tab++;
    const std::string_view name = rest.substr(0, tab);
    // __pfx_foo is the padding in front of foo (CONFIG_FUNCTION_PADDING_CFI): never a
    // return address's function, and it would shadow nothing useful.
    if (name.empty() || name.substr(0, 6) == "__pfx_") return;
    symbols_seen_++;
    const auto above = std::lower_bound(addrs_.begin(), addrs_.end(), addr);
    if (above == addrs_.end()) return;
    // >=: of aliases at one address, the last in the file names it.
    Symbol& kept = best_[size_t(above - addrs_.begin())];
    if (kept.addr && kept.addr > addr) return;
    kept.addr = addr;
    kept.name.assign(name);
    kept.module.clear();
    if (tab == rest.size()) return;
    const std::string_view after = rest.substr(tab);
    const size_t open = after.find('[');
    const size_t close = after.find(']');
    if (open != std::string_view::npos && close != std::string_view::npos && close > open)
      kept.module.assign(after.substr(open, close - open + 1));
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  std::vector<uint64_t> addrs_;  // sorted, distinct
  std::vector<Symbol> best_;     // per address: the highest symbol at or below it, once finished
  std::string partial_;          // a line split between two pieces
  size_t symbols_seen_ = 0;
};

// Opens /proc/kallsyms without reading it (cheap: call it from start()), and registers a
// probe's BPF_MAP_TYPE_STACK_TRACE map whose stacks emit_kernel_stacks() will name. The kernel
// decides at open() whether the reader may see addresses, from the opener's credentials, so a
// file opened while privileged still shows them after the recorder drops its capabilities.
// The map must stay open until the probes' finish() has run.
void open_kernel_symbols(int stack_map_fd);

// The names of `addrs`, from one streamed pass over /proc/kallsyms (the file open_kernel_symbols()
// opened, else a new open).
KernelAddressNames name_kernel_addresses(std::vector<uint64_t> addrs);

// One ld_kstack record (source = enum ld_probe_id) per stack in the BPF_MAP_TYPE_STACK_TRACE
// map `stack_map_fd` (value = LD_KSTACK_MAX_DEPTH u64 ips). Returns how many were emitted.
// `from_tick`: the stacks were taken in a program called from the scheduler tick's hrtimer
// (the perf probe's tick source): the tick's own interrupt path above the interrupted code is
// dropped too.
uint64_t emit_kernel_stacks(int stack_map_fd, uint32_t source, const EmitFn& emit, bool from_tick = false);

// [start, end) of kernel text symbols (end: the next higher symbol's address).
struct KernelTextRange {
  uint64_t start = 0;
  uint64_t end = 0;
};

// The range of each of `names` in the core kernel's text, in one pass over /proc/kallsyms
// that stops as soon as it can; {0, 0} for a name that is absent (or when addresses are
// hidden: kptr_restrict without CAP_SYSLOG).
std::vector<KernelTextRange> find_kernel_text(std::initializer_list<std::string_view> names);
// The same over a kallsyms text (inline, as Kallsyms: the unit tests use it without libbpf).
inline std::vector<KernelTextRange> find_kernel_text(std::istream& in, std::initializer_list<std::string_view> names) {
  std::string line;
  std::vector<KernelTextRange> found(names.size());
  auto complete = [&] {
    return std::all_of(found.begin(), found.end(), [](const KernelTextRange& r) { return r.end; });
  };
  // "ffffffff814352e0 t tick_nohz_handler", in address order. The core kernel's text comes
  // first and ends at _etext: no need to read the rest (modules, data; ~120k lines, ~40 ms).
  while (!complete() && std::getline(in, line)) {
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string::npos || sp2 != sp1 + 2) continue;
    const uint64_t addr = std::strtoull(line.c_str(), nullptr, 16);
    if (addr == 0) continue;  // hidden (kptr_restrict) or not hex
    // A symbol ends where the next one at a higher address starts (aliases share an address).
    for (KernelTextRange& r : found)
      if (r.start && !r.end && addr > r.start) r.end = addr;
    const std::string_view name(line.c_str() + sp2 + 1);
    if (name == "_etext") break;
    const char type = line[sp1 + 1];
    if (type != 't' && type != 'T') continue;
    const auto it = std::find(names.begin(), names.end(), name);
    if (it != names.end() && !found[size_t(it - names.begin())].start) found[size_t(it - names.begin())].start = addr;
  }
  for (KernelTextRange& r : found)
    if (!r.end) r = {};  // no end seen: not a usable range
  return found;
}

}  // namespace ld::probes
