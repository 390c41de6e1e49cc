// ELF symbol lookup (libelf) and Python runtime discovery for the uprobe-based probes.
#pragma once

#include <cstdint>
#include <optional>
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

// One file-backed mapping line of /proc/PID/maps.
struct MapsEntry {
  uint64_t start = 0, end = 0, offset = 0;
  std::string perms;  // "r-xp"
  std::string path;   // "" for anonymous mappings
};
std::optional<MapsEntry> parse_maps_line(const std::string& line);

// The files of a process's maps (`maps_text`, /proc/PID/maps) that may hold the CPython
// runtime, most likely first: libpython3.X.so* (shared builds), then python3.X itself
// (static builds, e.g. Debian's /usr/bin/python3.11). Deduplicated, each once.
std::vector<std::string> python_candidates(const std::string& maps_text);

// Where the GIL code of a process is.
struct PythonRuntime {
  std::string path;           // as in /proc/PID/maps
  std::string symbol;         // "take_gil" or "PyEval_RestoreThread"
  uint64_t file_offset = 0;   // of that symbol's code, for the uprobe
};

// Finds the target's Python: take_gil (local symbol, needs an unstripped build) or else the
// exported PyEval_RestoreThread. `root` prefixes file paths ("/proc/PID/root" for processes in
// another mount namespace, "" for tests). nullopt: no Python runtime in these mappings.
std::optional<PythonRuntime> find_python_runtime(const std::string& maps_text,
                                                 const std::string& root);

}  // namespace ld::probes
