// Native user-space frames named: a process's executable mappings (kept from /proc/PID/maps
// while it runs, so a process that exits before the recording ends is still named) and the
// ELF symbol tables of the mapped files: .symtab, else a separate debug file found by
// build-id under /usr/lib/debug/.build-id, else the MiniDebugInfo .gnu_debugdata section
// (xz, decoded with liblzma when the host has it), else .dynsym. Code in anonymous executable
// memory (a JIT) is named from /tmp/perf-PID.map where the runtime writes one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "events.h"
#include "probes/elf_symbols.hpp"

namespace ld::probes {

// The function names of one ELF file, by link-time address.
class ElfSymbolTable {
 public:
  // Loads the tables of `path` (read through `path`; debug files from the host's
  // /usr/lib/debug under `root`). Never throws: an unreadable or odd file has no symbols.
  static std::shared_ptr<const ElfSymbolTable> load(const std::string& path, const std::string& root = "");

  struct Hit {
    const std::string* name = nullptr;  // mangled as in the table
    uint64_t offset = 0;                // from the symbol's start
  };
  // The function covering link-time address `vaddr` (a symbol's size, or up to the next one).
  Hit lookup(uint64_t vaddr) const;
  // File offset -> link-time address through the PT_LOAD segment holding it.
  bool file_offset_to_vaddr(uint64_t offset, uint64_t* vaddr) const;
  size_t size() const { return syms_.size(); }
  const std::string& source() const { return source_; }  // ".symtab", "debug file", ".gnu_debugdata", ".dynsym", ""

 private:
  struct Sym {
    uint64_t addr = 0, size = 0;
    std::string name;
  };
  std::vector<Sym> syms_;  // sorted by addr
  std::vector<ElfLoad> loads_;
  std::string source_;
  friend struct ElfSymbolLoader;
};

// A C++ name demangled and without its parameter list ("ns::Cls::run"); others as they are.
std::string readable_symbol(const std::string& mangled);

class UserSymbolizer {
 public:
  // Reads (again) the mappings of `tgid`; keeps the last good ones when the process is gone.
  void snapshot(uint32_t tgid);
  bool known(uint32_t tgid) const { return maps_.count(tgid) > 0; }

  struct Stack {
    std::vector<ld_uframe> frames;  // innermost first
    uint32_t flags = 0;             // LD_USTACK_*
  };
  // Names a stack of `n` addresses of process `tgid`, innermost first (ips[0] is the
  // interrupted instruction, the others return addresses). The walk stops at the first return
  // address in no executable mapping: a frame-pointer walk through code without frame
  // pointers runs into data (LD_USTACK_CUT).
  Stack symbolize(uint32_t tgid, const uint64_t* ips, size_t n);

  // Symbol tables loaded so far (for the probe's detail).
  size_t files() const { return tables_.size(); }

 private:
  struct Jit {
    uint64_t start = 0, size = 0;
    std::string name;
  };
  const ElfSymbolTable& table(uint32_t tgid, const std::string& path);
  const std::vector<Jit>& jit_map(uint32_t tgid);

  std::map<uint32_t, std::vector<MapsEntry>> maps_;  // executable mappings, by start
  std::map<std::string, std::shared_ptr<const ElfSymbolTable>> tables_;
  std::map<uint32_t, std::vector<Jit>> jit_;
};

}  // namespace ld::probes
