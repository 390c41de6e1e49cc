// ELF symbol lookup (libelf) and Python runtime discovery for the uprobe-based probes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ld::probes {

struct ElfSymbol {
  uint64_t value = 0;        // st_value: link-time virtual address
  uint64_t size = 0;         // st_size
  uint64_t file_offset = 0;  // where the code is in the file: what a uprobe attaches to
  bool local = false;        // STB_LOCAL (only in .symtab: gone when the binary is stripped)
  bool dynamic = false;      // found in .dynsym
};

// Looks `name` up among the DEFINED symbols of .symtab, then .dynsym (undefined imports are
// skipped). nullopt when the file is not ELF, has no such symbol or cannot be read.
std::optional<ElfSymbol> find_elf_symbol(const std::string& path, const std::string& name);
// The DEFINED exported symbols (.dynsym only) of `path` among `names`, by name, in one pass over
// the table (a driver library exports thousands): what a stripped shared library still has.
// Names it lacks are absent; empty when the file is not ELF or cannot be read.
std::map<std::string, ElfSymbol> find_dynamic_symbols(const std::string& path, const std::set<std::string>& names);

// A PT_LOAD segment of an ELF file: how its bytes are placed in memory.
struct ElfLoad {
  uint64_t vaddr = 0, memsz = 0;    // link-time address and size in memory
  uint64_t offset = 0, filesz = 0;  // where its bytes are in the file
  bool exec = false;                // PF_X
};
// The PT_LOAD segments; empty when the file is not ELF or cannot be read.
std::vector<ElfLoad> elf_loads(const std::string& path);

// One file-backed mapping line of /proc/PID/maps.
struct MapsEntry {
  uint64_t start = 0, end = 0, offset = 0;
  std::string perms;  // "r-xp"
  std::string path;   // "" for anonymous mappings
};
std::optional<MapsEntry> parse_maps_line(const std::string& line);
// Every mapping of a maps text (/proc/PID/maps), in its order.
std::vector<MapsEntry> parse_maps(const std::string& maps_text);

// Where a file is loaded in a process: runtime address - link-time address, from a mapping of
// `path` in `maps` and the segment it maps (the one whose page-aligned file offset is the
// mapping's). nullopt when the file is not mapped or no mapping matches a segment.
std::optional<uint64_t> load_bias(const std::vector<MapsEntry>& maps, const std::string& path,
                                  const std::vector<ElfLoad>& loads);

// The files of a process's maps (`maps_text`, /proc/PID/maps) that may hold the CPython
// runtime, most likely first: libpython3.X.so* (shared builds), then python3.X itself
// (static builds, e.g. Debian's /usr/bin/python3.11). Deduplicated, each once.
std::vector<std::string> python_candidates(const std::string& maps_text);

// Where the GIL code of a process is.
struct PythonRuntime {
  std::string path;          // as in /proc/PID/maps
  std::string symbol;        // "take_gil" or "PyEval_RestoreThread"
  uint64_t file_offset = 0;  // of that symbol's code, for the uprobe
};

// Finds the target's Python: take_gil (local symbol, needs an unstripped build) or else the
// exported PyEval_RestoreThread. `root` prefixes file paths ("/proc/PID/root" for processes in
// another mount namespace, "" for tests). nullopt: no Python runtime in these mappings.
std::optional<PythonRuntime> find_python_runtime(const std::string& maps_text, const std::string& root);

}  // namespace ld::probes
