// CPython processes for the perf probe's Python walker (bpf/perf.bpf.c): where a process's
// _PyRuntime is and the byte offsets of the structures the walk reads, per interpreter version.
//
// 3.13 and later carry the offsets themselves (_Py_DebugOffsets at the start of _PyRuntime,
// initialised data: read from the file, not from the process); 3.10-3.12 (and 3.13 where the
// debug offsets cannot be read) take them from a table per minor version, checked against
// default x86-64 builds of each (pyenv's shared builds and Debian's static, stripped
// /usr/bin/python3.11). _PyRuntime and PyCode_Type are exported, so a stripped binary works.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "perf_maps.h"

namespace ld::probes {

struct PythonProcess {
  std::string path;      // the mapped file holding the runtime (/proc/PID/maps' name)
  uint32_t version = 0;  // 0x030b for 3.11
  std::string offsets;   // where the offsets came from: "_Py_DebugOffsets" or "table"
  ld_py_proc proc{};     // the value for ld_py_procs
};

// The CPython runtime of process `pid`, or nullopt with the reason in *why (not Python, a
// version the walker does not know, no _PyRuntime symbol, an unreadable file).
std::optional<PythonProcess> find_python_process(uint32_t pid, std::string* why);

// The offsets of a minor version (0x030a..0x030d) of a default 64-bit build; nullopt for others.
std::optional<ld_py_offsets> python_offsets_table(uint32_t version);

// 3.13's _Py_DebugOffsets as read from the file: the offsets and the full version
// (PY_VERSION_HEX), or nullopt when the bytes are not a layout this code knows.
struct DebugOffsets {
  uint64_t version = 0;
  ld_py_offsets off{};
};
std::optional<DebugOffsets> parse_debug_offsets(const std::string& bytes);

// 0x030b from a file name: "libpython3.11.so.1.0", "python3.11", "python3.11d"; 0 if none.
uint32_t python_version_from_name(const std::string& path);

}  // namespace ld::probes
