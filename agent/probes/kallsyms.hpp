// Kernel symbols from /proc/kallsyms, and the ld_kstack records made from a probe's stack map.
//
// Kallsyms and find_kernel_text's parser are header-only (no libbpf) so that the unit tier can
// test them on a fake file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "probes/probe.hpp"

namespace ld::probes {

class Kallsyms {
 public:
  struct Symbol {
    uint64_t addr;
    std::string name;  // "name" or "name [module]"
  };

  // Text symbols (t/T/w/W) of `in` in /proc/kallsyms format: "ffffffff81000000 T _stext" or
  // "ffffffffc0a01000 t foo\t[mod]". Lines that do not parse are skipped; all-zero addresses
  // (kptr_restrict hides them) are skipped, so an unprivileged read gives an empty table.
  static Kallsyms parse(std::istream& in) {
    Kallsyms table;
    std::string line;
    while (std::getline(in, line)) {
      Symbol sym;
      if (parse_line(line, sym)) table.symbols_.push_back(std::move(sym));
    }
    std::stable_sort(table.symbols_.begin(), table.symbols_.end(),
                     [](const Symbol& a, const Symbol& b) { return a.addr < b.addr; });
    return table;
  }

  static Kallsyms load(const std::string& path = "/proc/kallsyms") {
    std::ifstream in(path);
    return parse(in);
  }

  size_t size() const { return symbols_.size(); }

  // The symbol at or below `addr`, or nullptr when `addr` is below every symbol.
  const Symbol* find(uint64_t addr) const {
    auto it = std::upper_bound(symbols_.begin(), symbols_.end(), addr,
                               [](uint64_t a, const Symbol& s) { return a < s.addr; });
    if (it == symbols_.begin()) return nullptr;
    return &*std::prev(it);
  }

  // "func+0x1a" ("func+0x1a [mod]" for module code), "0xffffffff81234567" when unknown.
  std::string symbolize(uint64_t addr) const {
    char buf[32];
    const Symbol* sym = find(addr);
    // Past the last symbol by more than any function is long: not kernel text we know.
    if (!sym || addr - sym->addr > kMaxFunctionBytes) {
      std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(addr));
      return buf;
    }
    std::snprintf(buf, sizeof(buf), "+0x%llx", static_cast<unsigned long long>(addr - sym->addr));
    auto space = sym->name.find(' ');
    if (space == std::string::npos) return sym->name + buf;
    return sym->name.substr(0, space) + buf + sym->name.substr(space);
  }

 private:
  static constexpr uint64_t kMaxFunctionBytes = 1 << 20;

  static bool parse_line(std::string_view line, Symbol& out) {
    // "<hex addr> <type> <name>[\t[module]]"
    size_t sp1 = line.find(' ');
    if (sp1 == std::string_view::npos || sp1 == 0 || sp1 > 16) return false;
    uint64_t addr = 0;
    for (char c : line.substr(0, sp1)) {
      int digit = hex_digit(c);
      if (digit < 0) return false;
      addr = addr << 4 | uint64_t(digit);
    }
    if (addr == 0 || line.size() < sp1 + 4 || line[sp1 + 2] != ' ') return false;
    char type = line[sp1 + 1];
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') return false;
    std::string_view rest = line.substr(sp1 + 3);
    size_t tab = rest.find_first_of("\t ");
    std::string_view name = rest.substr(0, tab);
    // __pfx_foo is the padding in front of foo (CONFIG_FUNCTION_PADDING_CFI): never a
    // return address's function, and it would shadow nothing useful.
    if (name.empty() || name.substr(0, 6) == "__pfx_") return false;
    out.addr = addr;
    out.name = std::string(name);
    if (tab != std::string_view::npos) {
      std::string_view module = rest.substr(tab);
      size_t open = module.find('[');
      size_t close = module.find(']');
      if (open != std::string_view::npos && close != std::string_view::npos && close > open)
        out.name += " " + std::string(module.substr(open, close - open + 1));
    }
    return true;
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  std::vector<Symbol> symbols_;
};

// Opens /proc/kallsyms without reading it (cheap: call it from start()). The kernel decides
// at open() whether the reader may see addresses, from the opener's credentials, so a file
// opened while privileged still shows them after the recorder drops its capabilities; the
// ~80 ms parse then happens only when stacks are symbolised, not while attaching.
void open_kernel_symbols();

// /proc/kallsyms (from the file open_kernel_symbols() opened, if any), parsed once per
// process on first use.
const Kallsyms& kernel_symbols();

// One ld_kstack record (source = enum ld_probe_id) per stack in the BPF_MAP_TYPE_STACK_TRACE
// map `stack_map_fd` (value = LD_KSTACK_MAX_DEPTH u64 ips). Returns how many were emitted.
// `from_tick`: the stacks were taken in a program called from the scheduler tick's hrtimer
// (the perf probe's tick source): the tick's own interrupt path above the interrupted code is
// dropped too.
uint64_t emit_kernel_stacks(int stack_map_fd, uint32_t source, const EmitFn& emit,
                            bool from_tick = false);

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
  auto complete = [&] { return std::all_of(found.begin(), found.end(), [](const KernelTextRange& r) { return r.end; }); };
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
