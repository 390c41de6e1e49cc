// ELF symbol lookup with libelf, and finding the CPython runtime in /proc/PID/maps.
#include "probes/elf_symbols.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace ld::probes {
namespace {

struct ElfFile {
  int fd = -1;
  Elf* elf = nullptr;
  explicit ElfFile(const std::string& path) {
    if (elf_version(EV_CURRENT) == EV_NONE) return;
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) elf = elf_begin(fd, ELF_C_READ, nullptr);
  }
  ~ElfFile() {
    if (elf) elf_end(elf);
    if (fd >= 0) close(fd);
  }
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;
};

// Link-time address -> file offset, through the PT_LOAD segment that maps it.
std::optional<uint64_t> vaddr_to_offset(Elf* elf, uint64_t vaddr) {
  size_t n = 0;
  if (elf_getphdrnum(elf, &n)) return std::nullopt;
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) return vaddr - ph.p_vaddr + ph.p_offset;
  }
  return std::nullopt;
}

// The symbol's code as an ElfSymbol; nullopt for an import (undefined: not the code) or an
// address no segment holds.
std::optional<ElfSymbol> defined_symbol(Elf* elf, const GElf_Shdr& sh, const GElf_Sym& sym) {
  if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) return std::nullopt;
  auto off = vaddr_to_offset(elf, sym.st_value);
  if (!off) return std::nullopt;
  ElfSymbol out;
  out.value = sym.st_value;
  out.size = sym.st_size;
  out.file_offset = *off;
  out.local = GELF_ST_BIND(sym.st_info) == STB_LOCAL;
  out.dynamic = sh.sh_type == SHT_DYNSYM;
  return out;
}

// Calls take(name, symbol) for each defined symbol of a symbol table whose name is wanted(name),
// until take returns true. The name is asked first: resolving every symbol would be wasted.
template <typename Wanted, typename Take>
void scan_table(Elf* elf, Elf_Scn* scn, const GElf_Shdr& sh, Wanted&& wanted, Take&& take) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || !sh.sh_entsize) return;
  size_t count = sh.sh_size / sh.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym sym;
    if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
    const char* sname = elf_strptr(elf, sh.sh_link, sym.st_name);
    if (!sname || !wanted(sname)) continue;
    auto found = defined_symbol(elf, sh, sym);
    if (found && take(sname, *found)) return;
  }
}

// Calls scan on each section of `type` (SHT_SYMTAB, SHT_DYNSYM) with its header.
template <typename Scan>
void for_each_table(Elf* elf, Elf64_Word type, Scan&& scan) {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn))) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) && sh.sh_type == type) scan(scn, sh);
  }
}

std::string basename_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::optional<ElfSymbol> find_elf_symbol(const std::string& path, const std::string& name) {
  ElfFile file(path);
  if (!file.elf || elf_kind(file.elf) != ELF_K_ELF) return std::nullopt;
  // .symtab first: it also has the local symbols (take_gil is static in ceval_gil.c).
  for (Elf64_Word type : {SHT_SYMTAB, SHT_DYNSYM}) {
    std::optional<ElfSymbol> out;
    for_each_table(file.elf, type, [&](Elf_Scn* scn, const GElf_Shdr& sh) {
      if (out) return;
      auto wanted = [&](const char* sname) { return name == sname; };
      scan_table(file.elf, scn, sh, wanted, [&](const char*, const ElfSymbol& sym) {
        out = sym;
        return true;
      });
    });
    if (out) return out;
  }
  return std::nullopt;
}

std::map<std::string, ElfSymbol> find_dynamic_symbols(const std::string& path, const std::set<std::string>& names) {
  std::map<std::string, ElfSymbol> out;
  ElfFile file(path);
  if (!file.elf || elf_kind(file.elf) != ELF_K_ELF) return out;
  for_each_table(file.elf, SHT_DYNSYM, [&](Elf_Scn* scn, const GElf_Shdr& sh) {
    auto wanted = [&](const char* sname) { return names.count(sname) > 0; };
    scan_table(file.elf, scn, sh, wanted, [&](const char* sname, const ElfSymbol& sym) {
      out.emplace(sname, sym);
      return out.size() == names.size();
    });
  });
  return out;
}

std::vector<ElfLoad> elf_loads(const std::string& path) {
  std::vector<ElfLoad> out;
  ElfFile file(path);
  if (!file.elf || elf_kind(file.elf) != ELF_K_ELF) return out;
  size_t n = 0;
  if (elf_getphdrnum(file.elf, &n)) return out;
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(file.elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    out.push_back({ph.p_vaddr, ph.p_memsz, ph.p_offset, ph.p_filesz, (ph.p_flags & PF_X) != 0});
  }
  return out;
}

std::optional<uint64_t> load_bias(const std::vector<MapsEntry>& maps, const std::string& path,
                                  const std::vector<ElfLoad>& loads) {
  constexpr uint64_t kPage = 4096;  // maps offsets are page-aligned; segments align at least to it
  for (const MapsEntry& m : maps) {
    if (m.path != path) continue;
    for (const ElfLoad& l : loads) {
      if ((l.offset & ~(kPage - 1)) != m.offset) continue;
      return m.start - (l.vaddr & ~(kPage - 1));
    }
  }
  return std::nullopt;
}

std::vector<MapsEntry> parse_maps(const std::string& maps_text) {
  std::vector<MapsEntry> out;
  std::istringstream in(maps_text);
  std::string line;
  while (std::getline(in, line))
    if (auto e = parse_maps_line(line)) out.push_back(std::move(*e));
  return out;
}

std::optional<MapsEntry> parse_maps_line(const std::string& line) {
  // 7f1c2a000000-7f1c2a200000 r-xp 00028000 08:01 1234567   /usr/lib/libpython3.11.so.1.0
  std::istringstream in(line);
  std::string range, perms, offset, dev, inode;
  if (!(in >> range >> perms >> offset >> dev >> inode)) return std::nullopt;
  auto dash = range.find('-');
  if (dash == std::string::npos) return std::nullopt;
  MapsEntry e;
  try {
    e.start = std::stoull(range.substr(0, dash), nullptr, 16);
    e.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    e.offset = std::stoull(offset, nullptr, 16);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  e.perms = perms;
  std::string rest;
  std::getline(in, rest);
  auto first = rest.find_first_not_of(' ');
  e.path = first == std::string::npos ? "" : rest.substr(first);
  return e;
}

std::vector<std::string> python_candidates(const std::string& maps_text) {
  std::vector<std::string> libs, exes;
  std::istringstream in(maps_text);
  std::string line;
  while (std::getline(in, line)) {
    auto e = parse_maps_line(line);
    if (!e || e->path.empty() || e->path[0] != '/') continue;  // [heap], anonymous
    if (e->path.find(" (deleted)") != std::string::npos) continue;
    std::string base = basename_of(e->path);
    // Extension modules are "*.cpython-311-*.so": not "python*" nor "libpython*".
    auto* list = starts_with(base, "libpython") ? &libs : starts_with(base, "python") ? &exes : nullptr;
    if (list && std::find(list->begin(), list->end(), e->path) == list->end()) list->push_back(e->path);
  }
  libs.insert(libs.end(), exes.begin(), exes.end());
  return libs;
}

std::optional<PythonRuntime> find_python_runtime(const std::string& maps_text, const std::string& root) {
  for (const auto& path : python_candidates(maps_text)) {
    for (const char* symbol : {"take_gil", "PyEval_RestoreThread"}) {
      if (auto sym = find_elf_symbol(root + path, symbol)) return PythonRuntime{path, symbol, sym->file_offset};
    }
  }
  return std::nullopt;
}

}  // namespace ld::probes
