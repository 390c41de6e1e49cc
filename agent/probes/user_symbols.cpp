// Native user frames named from ELF symbol tables (user_symbols.hpp).
#include "probes/user_symbols.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "util/files.hpp"

namespace ld::probes {
namespace {

struct ElfHandle {
  int fd = -1;
  Elf* elf = nullptr;
  explicit ElfHandle(const std::string& path) {
    if (elf_version(EV_CURRENT) == EV_NONE) return;
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) elf = elf_begin(fd, ELF_C_READ, nullptr);
  }
  // An ELF image in memory (the decoded .gnu_debugdata); `bytes` must outlive it.
  explicit ElfHandle(std::string& bytes) {
    if (elf_version(EV_CURRENT) == EV_NONE) return;
    elf = elf_memory(bytes.data(), bytes.size());
  }
  ~ElfHandle() {
    if (elf) elf_end(elf);
    if (fd >= 0) close(fd);
  }
  ElfHandle(const ElfHandle&) = delete;
  ElfHandle& operator=(const ElfHandle&) = delete;
  bool ok() const { return elf && elf_kind(elf) == ELF_K_ELF; }
};

Elf_Scn* section_named(Elf* elf, const char* name, GElf_Shdr* out) {
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx)) return nullptr;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn))) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char* n = elf_strptr(elf, shstrndx, sh.sh_name);
    if (n && std::strcmp(n, name) == 0) {
      *out = sh;
      return scn;
    }
  }
  return nullptr;
}

// The GNU build-id as lower-case hex, "" when the file has none.
std::string build_id(Elf* elf) {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn))) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    size_t off = 0, name_off = 0, desc_off = 0;
    GElf_Nhdr nh;
    while ((off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
      if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
          std::memcmp(static_cast<const char*>(data->d_buf) + name_off, "GNU", 4) != 0)
        continue;
      std::string hex;
      const auto* d = static_cast<const uint8_t*>(data->d_buf) + desc_off;
      for (size_t i = 0; i < nh.n_descsz; ++i) hex += fmt::format("{:02x}", d[i]);
      return hex;
    }
  }
  return "";
}

// liblzma, loaded when a file has MiniDebugInfo (the agent does not link it).
using LzmaDecode = int (*)(uint64_t* memlimit, uint32_t flags, const void* allocator, const uint8_t* in, size_t* in_pos,
                           size_t in_size, uint8_t* out, size_t* out_pos, size_t out_size);
LzmaDecode lzma_decoder() {
  static LzmaDecode fn = [] {
    void* lib = dlopen("liblzma.so.5", RTLD_NOW | RTLD_LOCAL);
    return lib ? reinterpret_cast<LzmaDecode>(dlsym(lib, "lzma_stream_buffer_decode")) : nullptr;
  }();
  return fn;
}

// The xz stream of .gnu_debugdata decoded (an ELF image with .symtab), or "".
std::string decode_xz(const uint8_t* in, size_t len) {
  LzmaDecode decode = lzma_decoder();
  if (!decode || len == 0) return "";
  constexpr int kLzmaBufError = 10;
  for (size_t cap = std::max<size_t>(len * 4, 64 << 10); cap <= (256u << 20); cap *= 2) {
    std::string out(cap, '\0');
    uint64_t memlimit = UINT64_MAX;
    size_t in_pos = 0, out_pos = 0;
    const int ret =
        decode(&memlimit, 0, nullptr, in, &in_pos, len, reinterpret_cast<uint8_t*>(out.data()), &out_pos, out.size());
    if (ret == 0) {
      out.resize(out_pos);
      return out;
    }
    if (ret != kLzmaBufError) return "";
  }
  return "";
}

}  // namespace

struct ElfSymbolLoader {
  // Adds the FUNC symbols of the table `type` (SHT_SYMTAB or SHT_DYNSYM); false if it has none.
  static bool add_table(ElfSymbolTable& t, Elf* elf, Elf64_Word type) {
    bool found = false;
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(elf, scn))) {
      GElf_Shdr sh;
      if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (!data) continue;
      const size_t count = sh.sh_size / sh.sh_entsize;
      for (size_t i = 0; i < count; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
        const int kind = GELF_ST_TYPE(sym.st_info);
        if ((kind != STT_FUNC && kind != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
        const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
        if (!name || !*name) continue;
        // Unsized and just before the PLT: as "up to the next symbol" they would name every
        // PLT stub a sample lands in.
        if (!sym.st_size && (std::strcmp(name, "_init") == 0 || std::strcmp(name, "_fini") == 0)) continue;
        t.syms_.push_back({sym.st_value, sym.st_size, name});
        found = true;
      }
    }
    return found;
  }
};

std::shared_ptr<const ElfSymbolTable> ElfSymbolTable::load(const std::string& path, const std::string& root) {
  auto t = std::make_shared<ElfSymbolTable>();
  t->loads_ = elf_loads(path);
  ElfHandle file(path);
  if (!file.ok()) return t;
  if (ElfSymbolLoader::add_table(*t, file.elf, SHT_SYMTAB)) {
    t->source_ = ".symtab";
  } else {
    // A stripped file: its debug file by build-id, its MiniDebugInfo, or its dynamic symbols.
    const std::string id = build_id(file.elf);
    if (id.size() > 2) {
      ElfHandle debug(fmt::format("{}/usr/lib/debug/.build-id/{}/{}.debug", root, id.substr(0, 2), id.substr(2)));
      if (debug.ok() && ElfSymbolLoader::add_table(*t, debug.elf, SHT_SYMTAB)) t->source_ = "debug file";
    }
    GElf_Shdr sh;
    Elf_Scn* mini = t->source_.empty() ? section_named(file.elf, ".gnu_debugdata", &sh) : nullptr;
    if (Elf_Data* data = mini ? elf_rawdata(mini, nullptr) : nullptr) {
      std::string image = decode_xz(static_cast<const uint8_t*>(data->d_buf), data->d_size);
      if (!image.empty()) {
        ElfHandle inner(image);
        if (inner.ok() && ElfSymbolLoader::add_table(*t, inner.elf, SHT_SYMTAB)) t->source_ = ".gnu_debugdata";
      }
    }
    // MiniDebugInfo holds only what .dynsym lacks: both are wanted.
    if (ElfSymbolLoader::add_table(*t, file.elf, SHT_DYNSYM) && t->source_.empty()) t->source_ = ".dynsym";
  }
  auto& syms = t->syms_;
  std::sort(syms.begin(), syms.end(),
            [](const Sym& a, const Sym& b) { return a.addr != b.addr ? a.addr < b.addr : a.size > b.size; });
  // Aliases at one address: keep the first (the sized one).
  syms.erase(std::unique(syms.begin(), syms.end(), [](const Sym& a, const Sym& b) { return a.addr == b.addr; }),
             syms.end());
  return t;
}

ElfSymbolTable::Hit ElfSymbolTable::lookup(uint64_t vaddr) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), vaddr, [](uint64_t v, const Sym& s) { return v < s.addr; });
  if (it == syms_.begin()) return {};
  --it;
  // Sized: within it. Unsized (hand-written assembly): up to the next symbol, within 64 KiB.
  if (it->size ? vaddr >= it->addr + it->size : vaddr - it->addr > (64u << 10)) return {};
  return {&it->name, vaddr - it->addr};
}

bool ElfSymbolTable::file_offset_to_vaddr(uint64_t offset, uint64_t* vaddr) const {
  for (const ElfLoad& l : loads_) {
    if (offset >= l.offset && offset < l.offset + l.filesz) {
      *vaddr = offset - l.offset + l.vaddr;
      return true;
    }
  }
  return false;
}

std::string readable_symbol(const std::string& mangled) {
  if (mangled.rfind("_Z", 0) != 0) return mangled;
  int status = 0;
  char* out = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !out) {
    std::free(out);
    return mangled;
  }
  std::string s(out);
  std::free(out);
  // GCC's partial and specialised copies: "f(double) [clone .part.0] [clone .constprop.0]".
  for (size_t at; (at = s.rfind(" [clone ")) != std::string::npos && s.back() == ']';) s.resize(at);
  // "ns::f(int) const" -> "ns::f": cut the last balanced parameter list.
  for (const char* suffix : {" const", " volatile", " &&", " &"})
    while (s.size() > std::strlen(suffix) && s.compare(s.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
      s.resize(s.size() - std::strlen(suffix));
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') depth++;
      if (s[i] == '(' && --depth == 0) {
        s.resize(i);
        break;
      }
    }
  }
  return s;
}

void UserSymbolizer::snapshot(uint32_t tgid) {
  const std::string text = util::read_file(fmt::format("/proc/{}/maps", tgid));
  if (text.empty()) return;  // gone: keep what was seen
  std::vector<MapsEntry> exec;
  for (MapsEntry& m : parse_maps(text))
    if (m.perms.size() >= 3 && m.perms[2] == 'x') exec.push_back(std::move(m));
  std::sort(exec.begin(), exec.end(), [](const MapsEntry& a, const MapsEntry& b) { return a.start < b.start; });
  maps_[tgid] = std::move(exec);
  jit_.erase(tgid);  // read again when wanted
}

const ElfSymbolTable& UserSymbolizer::table(uint32_t tgid, const std::string& path) {
  const std::string root = fmt::format("/proc/{}/root", tgid);
  auto it = tables_.find(path);
  if (it != tables_.end()) return *it->second;
  // Through the process's root (its mount namespace); the host path when that is gone.
  auto t = ElfSymbolTable::load(root + path, root);
  if (t->size() == 0) {
    auto host = ElfSymbolTable::load(path);
    if (host->size() > 0) t = host;
  }
  return *tables_.emplace(path, std::move(t)).first->second;
}

const std::vector<UserSymbolizer::Jit>& UserSymbolizer::jit_map(uint32_t tgid) {
  auto [it, added] = jit_.try_emplace(tgid);
  if (!added) return it->second;
  // "START SIZE name" in hex, one symbol a line (perf's JIT interface).
  std::string text = util::read_file(fmt::format("/proc/{}/root/tmp/perf-{}.map", tgid, tgid));
  if (text.empty()) text = util::read_file(fmt::format("/tmp/perf-{}.map", tgid));
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    char* end = nullptr;
    Jit j;
    j.start = std::strtoull(line.c_str(), &end, 16);
    if (!end || *end != ' ') continue;
    char* end2 = nullptr;
    j.size = std::strtoull(end + 1, &end2, 16);
    if (!end2 || *end2 != ' ') continue;
    j.name = std::string(end2 + 1);
    it->second.push_back(std::move(j));
  }
  std::sort(it->second.begin(), it->second.end(), [](const Jit& a, const Jit& b) { return a.start < b.start; });
  return it->second;
}

UserSymbolizer::Stack UserSymbolizer::symbolize(uint32_t tgid, const uint64_t* ips, size_t n) {
  Stack out;
  auto maps_it = maps_.find(tgid);
  if (maps_it == maps_.end()) out.flags |= LD_USTACK_NO_MAPS;
  static const std::vector<MapsEntry> kNone;
  const std::vector<MapsEntry>& maps = maps_it == maps_.end() ? kNone : maps_it->second;
  auto copy = [](char* dst, size_t cap, const std::string& s) {
    const size_t len = std::min(s.size(), cap - 1);
    std::memcpy(dst, s.data(), len);
    dst[len] = 0;
  };
  for (size_t i = 0; i < n && i < LD_USTACK_MAX_DEPTH; ++i) {
    const uint64_t ip = ips[i];
    if (ip == 0) break;
    // A return address points after its call: name the call's function (the byte before).
    const uint64_t at = i == 0 ? ip : ip - 1;
    ld_uframe f{};
    auto m = std::upper_bound(maps.begin(), maps.end(), at, [](uint64_t a, const MapsEntry& e) { return a < e.start; });
    const MapsEntry* map = m != maps.begin() && at < std::prev(m)->end ? &*std::prev(m) : nullptr;
    if (!map && !maps.empty() && i > 0) {
      out.flags |= LD_USTACK_CUT;  // into data: the frame-pointer walk lost its way
      break;
    }
    if (!map) {
      f.offset = ip;
    } else if (map->path.empty() || map->path[0] != '/') {
      // Anonymous executable memory ([anon], a JIT's code) or [vdso]: a JIT's perf map names it.
      copy(f.module, sizeof(f.module), map->path.empty() ? "[anon]" : map->path);
      f.offset = at - map->start;
      const auto& jit = jit_map(tgid);
      auto j = std::upper_bound(jit.begin(), jit.end(), at, [](uint64_t a, const Jit& e) { return a < e.start; });
      if (j != jit.begin() && at < std::prev(j)->start + std::prev(j)->size) {
        copy(f.func, sizeof(f.func), std::prev(j)->name);
        f.offset = at - std::prev(j)->start;
      }
    } else {
      const std::string path = map->path.substr(0, map->path.find(" (deleted)"));
      copy(f.module, sizeof(f.module), path.substr(path.rfind('/') + 1));
      const uint64_t file_off = at - map->start + map->offset;
      const ElfSymbolTable& t = table(tgid, path);
      uint64_t vaddr = 0;
      f.offset = file_off;
      if (t.file_offset_to_vaddr(file_off, &vaddr)) {
        if (auto hit = t.lookup(vaddr); hit.name) {
          copy(f.func, sizeof(f.func), readable_symbol(*hit.name));
          f.offset = hit.offset;
        }
      }
    }
    out.frames.push_back(f);
  }
  return out;
}

}  // namespace ld::probes
