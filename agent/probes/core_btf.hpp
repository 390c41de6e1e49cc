// One parse of the kernel's BTF for all probes.
//
// libbpf (1.1) parses the whole vmlinux BTF (~5 MiB, ~130k types) once per BPF object and, for
// every CO-RE relocation's root type, scans all of it for candidates: with ten objects that
// was about half of the attach time. CoreBtf parses it once and writes a small BTF holding
// only what the objects' relocations can match: every kernel type whose (essential) name and
// kind match a relocation's root type, plus everything those types embed by value (members,
// arrays, typedefs, modifiers). Pointers are kept as `void *`: a relocation never follows a
// pointer (`a->b->c` is one relocation per struct), and libbpf's field compatibility check
// accepts any pointer for a pointer. Each object then gets it as `btf_custom_path`, so libbpf
// neither parses vmlinux nor scans it.
//
// The candidates are the same set, in the same order, with the same members and offsets, so
// the relocated programs are the same instructions (checked by a root-tier test). Where that
// cannot be promised, the object keeps libbpf's default path: relocation kinds whose result
// depends on more than the root (type id in the kernel, type matching, type existence of a
// typedef/pointer), or a root the vmlinux BTF lacks while module BTFs exist (libbpf would look
// there). Any failure to build means every object keeps the default path.
//
// Why: it halves attaching, wall time and CPU alike, at the same peak RSS
// (docs/performance.md, "Smaller choices"; ProbeOptions::shared_core_btf = false for the other
// side).
// Not `bpftool gen min_core_btf`: that runs at build time against the build host's BTF (or a
// BTFHub file per kernel build), while the agent relocates against the kernel it runs on, whose
// BTF it reads here; no per-kernel files are shipped.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ld::probes {

struct CoreObject {
  std::string name;  // probe name, for path_for()
  const void* elf = nullptr;
  size_t size = 0;
};

class CoreBtf {
 public:
  CoreBtf() = default;
  ~CoreBtf();
  CoreBtf(CoreBtf&& other) noexcept;
  CoreBtf& operator=(CoreBtf&& other) noexcept;
  CoreBtf(const CoreBtf&) = delete;
  CoreBtf& operator=(const CoreBtf&) = delete;

  // Never throws: what it cannot do falls back to libbpf's default for that object.
  static CoreBtf build(const std::vector<CoreObject>& objects);

  // The btf_custom_path for this object, or nullptr for libbpf's default (the whole vmlinux).
  const char* path_for(const std::string& object) const;

  // For --verbose: what was built ("N of M kernel types for K objects in X ms") or why not.
  const std::string& note() const { return note_; }

 private:
  int fd_ = -1;  // memfd holding the raw BTF; path_ is /proc/self/fd/N
  std::string path_;
  std::vector<std::string> served_;
  std::string note_;
};

}  // namespace ld::probes
