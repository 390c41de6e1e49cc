// Finding a process's CPython runtime and the offsets its Python walker needs (python_frames.hpp).
#include "probes/python_frames.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <regex>

#include <fmt/format.h>

#include "probes/elf_symbols.hpp"
#include "util/files.hpp"

namespace ld::probes {
namespace {

std::string read_at(const std::string& path, uint64_t offset, size_t len) {
  std::string out(len, '\0');
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const ssize_t n = pread(fd, out.data(), len, static_cast<off_t>(offset));
  close(fd);
  if (n != static_cast<ssize_t>(len)) return "";
  return out;
}

uint64_t u64_at(const std::string& bytes, size_t index) {
  uint64_t v = 0;
  if ((index + 1) * 8 <= bytes.size()) std::memcpy(&v, bytes.data() + index * 8, 8);
  return v;
}

uint32_t u32(uint64_t v) { return v > 0xffff ? LD_PY_NONE : static_cast<uint32_t>(v); }

}  // namespace

std::optional<ld_py_offsets> python_offsets_table(uint32_t version) {
  ld_py_offsets o{};
  // Common to 3.10-3.13 on 64-bit: PyObject, PyVarObject and PyBytesObject, PyASCIIObject's head.
  o.object_type = 8;
  o.bytes_size = 16;
  o.bytes_data = 32;
  o.str_length = 16;
  o.str_state = 32;
  switch (version) {
    case 0x030a:
      o.runtime_interp_head = 32;
      o.interp_threads_head = 8;  // tstate_head
      o.tstate_next = 8;
      o.tstate_id = 176;    // thread_id: pthread_self()
      o.tstate_frame = 24;  // frame: a PyFrameObject
      o.cframe_frame = LD_PY_NONE;
      o.frame_code = 32;      // f_code
      o.frame_previous = 24;  // f_back
      o.frame_instr = 96;     // f_lasti
      o.frame_owner = LD_PY_NONE;
      o.code_name = 112;  // co_name (no co_qualname yet)
      o.code_filename = 104;
      o.code_firstlineno = 40;
      o.code_linetable = 120;
      o.code_adaptive = LD_PY_NONE;
      o.str_ascii_data = 48;
      o.str_utf8 = 56;
      return o;
    case 0x030b:
      o.runtime_interp_head = 40;
      o.interp_threads_head = 16;
      o.tstate_next = 8;
      o.tstate_id = 160;    // native_thread_id
      o.tstate_frame = 56;  // cframe
      o.cframe_frame = 8;   // _PyCFrame.current_frame
      o.frame_code = 32;
      o.frame_previous = 48;
      o.frame_instr = 56;          // prev_instr
      o.frame_owner = LD_PY_NONE;  // no C-stack shim frames before 3.12
      o.code_name = 128;           // co_qualname
      o.code_filename = 112;
      o.code_firstlineno = 72;
      o.code_linetable = 136;
      o.code_adaptive = 184;
      o.str_ascii_data = 48;
      o.str_utf8 = 56;
      return o;
    case 0x030c:
      o.runtime_interp_head = 40;
      o.interp_threads_head = 72;
      o.tstate_next = 8;
      o.tstate_id = 144;
      o.tstate_frame = 56;
      o.cframe_frame = 0;
      o.frame_code = 0;
      o.frame_previous = 8;
      o.frame_instr = 56;
      o.frame_owner = 70;
      o.code_name = 128;
      o.code_filename = 112;
      o.code_firstlineno = 68;
      o.code_linetable = 136;
      o.code_adaptive = 192;
      o.str_ascii_data = 40;
      o.str_utf8 = 48;
      return o;
    case 0x030d:
      o.runtime_interp_head = 632;
      o.interp_threads_head = 7344;
      o.tstate_next = 8;
      o.tstate_id = 160;
      o.tstate_frame = 72;  // current_frame
      o.cframe_frame = LD_PY_NONE;
      o.frame_code = 0;  // f_executable
      o.frame_previous = 8;
      o.frame_instr = 56;  // instr_ptr
      o.frame_owner = 70;
      o.code_name = 128;
      o.code_filename = 112;
      o.code_firstlineno = 68;
      o.code_linetable = 136;
      o.code_adaptive = 200;
      o.str_ascii_data = 40;
      o.str_utf8 = 48;
      return o;
    default: return std::nullopt;
  }
}

std::optional<DebugOffsets> parse_debug_offsets(const std::string& bytes) {
  // struct _Py_DebugOffsets of 3.13 (Include/internal/pycore_runtime.h), read as u64 words:
  // 0 cookie "xdebugpy", 1 version, 2 free_threaded, then each sub-struct's size and fields.
  constexpr size_t kWords = 73;
  if (bytes.size() < kWords * 8 || bytes.compare(0, 8, "xdebugpy") != 0) return std::nullopt;
  DebugOffsets d;
  d.version = u64_at(bytes, 1);
  // 3.14 grew the struct (new fields between these): another table of indexes.
  if ((d.version >> 16) != 0x030d || u64_at(bytes, 2) != 0) return std::nullopt;  // free-threaded: other layouts
  ld_py_offsets& o = d.off;
  o.runtime_interp_head = u32(u64_at(bytes, 5));
  o.interp_threads_head = u32(u64_at(bytes, 9));
  o.tstate_next = u32(u64_at(bytes, 21));
  o.tstate_frame = u32(u64_at(bytes, 23));
  o.tstate_id = u32(u64_at(bytes, 25));
  o.cframe_frame = LD_PY_NONE;
  o.frame_previous = u32(u64_at(bytes, 29));
  o.frame_code = u32(u64_at(bytes, 30));
  o.frame_instr = u32(u64_at(bytes, 31));
  o.frame_owner = u32(u64_at(bytes, 33));
  o.code_filename = u32(u64_at(bytes, 35));
  o.code_name = u32(u64_at(bytes, 37));  // qualname
  o.code_linetable = u32(u64_at(bytes, 38));
  o.code_firstlineno = u32(u64_at(bytes, 39));
  o.code_adaptive = u32(u64_at(bytes, 43));
  o.object_type = u32(u64_at(bytes, 45));
  o.bytes_size = u32(u64_at(bytes, 65));
  o.bytes_data = u32(u64_at(bytes, 66));
  o.str_state = u32(u64_at(bytes, 68));
  o.str_length = u32(u64_at(bytes, 69));
  o.str_ascii_data = u32(u64_at(bytes, 70));
  o.str_utf8 = o.str_ascii_data == LD_PY_NONE ? LD_PY_NONE : o.str_ascii_data + 8;  // after utf8_length
  // Every offset the walker reads within what it reads at once (bpf/perf_maps.h).
  for (uint32_t v : {o.frame_code, o.frame_previous, o.frame_instr, o.frame_owner})
    if (v == LD_PY_NONE || v + 8 > LD_PY_FRAME_READ) return std::nullopt;
  for (uint32_t v : {o.code_name, o.code_filename, o.code_firstlineno, o.code_linetable, o.object_type})
    if (v == LD_PY_NONE || v + 8 > LD_PY_CODE_READ) return std::nullopt;
  if (o.runtime_interp_head == LD_PY_NONE || o.interp_threads_head == LD_PY_NONE || o.tstate_frame == LD_PY_NONE ||
      o.tstate_id == LD_PY_NONE || o.code_adaptive == LD_PY_NONE || o.str_utf8 + 8 > 64)
    return std::nullopt;
  return d;
}

uint32_t python_version_from_name(const std::string& path) {
  static const std::regex re(R"((?:^|/)(?:lib)?python([23])\.([0-9]+)[a-z]*(?:\.so[.0-9]*)?$)");
  std::smatch m;
  if (!std::regex_search(path, m, re)) return 0;
  return static_cast<uint32_t>(std::stoul(m[1]) << 8 | std::stoul(m[2]));
}

std::optional<PythonProcess> find_python_process(uint32_t pid, std::string* why) {
  const std::string maps_text = util::read_file(fmt::format("/proc/{}/maps", pid));
  if (maps_text.empty()) {
    *why = "its maps could not be read (exited?)";
    return std::nullopt;
  }
  const std::string root = fmt::format("/proc/{}/root", pid);
  const auto maps = parse_maps(maps_text);
  std::string last_why = "not a CPython process";
  for (const std::string& path : python_candidates(maps_text)) {
    const std::string file = root + path;
    auto runtime = find_elf_symbol(file, "_PyRuntime");
    if (!runtime) {
      last_why = fmt::format("{}: no _PyRuntime symbol", path);
      continue;
    }
    PythonProcess p;
    p.path = path;
    // The version: Py_Version (3.11+, exported const data), else the file's name.
    uint64_t hex = 0;
    if (auto v = find_elf_symbol(file, "Py_Version")) {
      const std::string bytes = read_at(file, v->file_offset, 8);
      if (bytes.size() == 8) std::memcpy(&hex, bytes.data(), 8);
    }
    p.version = hex ? static_cast<uint32_t>(hex >> 16) : python_version_from_name(path);
    std::optional<ld_py_offsets> off;
    if (p.version >= 0x030d) {
      // _PyRuntime is initialised data: its first bytes in the file are _Py_DebugOffsets.
      if (auto d = parse_debug_offsets(read_at(file, runtime->file_offset, 73 * 8))) {
        off = d->off;
        p.version = static_cast<uint32_t>(d->version >> 16);
        p.offsets = "_Py_DebugOffsets";
      }
    }
    if (!off && (off = python_offsets_table(p.version))) p.offsets = "table";
    if (!off) {
      last_why = fmt::format("{}: Python {}.{} (Python frames are read for 3.10-3.13)", path, p.version >> 8,
                             p.version & 0xff);
      continue;
    }
    const auto loads = elf_loads(file);
    const auto bias = load_bias(maps, path, loads);
    if (!bias) {
      last_why = fmt::format("{}: where it is loaded is not known", path);
      continue;
    }
    p.proc.runtime = runtime->value + *bias;
    if (auto code_type = find_elf_symbol(file, "PyCode_Type")) p.proc.code_type = code_type->value + *bias;
    p.proc.version = p.version;
    p.proc.id_is_fsbase = p.version == 0x030a;
    p.proc.off = *off;
#if !defined(__x86_64__)
    if (p.proc.id_is_fsbase) {
      last_why = fmt::format("{}: Python 3.10 threads are found by their fs base, x86-64 only", path);
      continue;
    }
#endif
    return p;
  }
  *why = last_why;
  return std::nullopt;
}

}  // namespace ld::probes
