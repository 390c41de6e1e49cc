#include "probes/core_btf.hpp"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/bpf.h>  // struct bpf_core_relo, enum bpf_core_relo_kind (UAPI)

#include <bpf/btf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "host/host_facts.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

// The .BTF.ext header as the kernel documents it (Documentation/bpf/btf.rst, "4.2 .BTF.ext
// section"): offsets are relative to the end of the header, and core_relo_off/len, "the
// optional part", are there when hdr_len covers them. No installed header declares it. The
// core_relo sub-section is a u32 record size, then per ELF section {u32 sec_name_off, u32
// num_info} followed by num_info records, each a struct bpf_core_relo (<linux/bpf.h>).
struct BtfExtHeader {
  uint16_t magic;
  uint8_t version;
  uint8_t flags;
  uint32_t hdr_len;
  uint32_t func_info_off, func_info_len;
  uint32_t line_info_off, line_info_len;
  uint32_t core_relo_off, core_relo_len;
};
constexpr uint16_t kBtfMagic = 0xeB9F;  // BTF_MAGIC

struct Deleter {
  void operator()(btf* b) const { btf__free(b); }
};
using BtfPtr = std::unique_ptr<btf, Deleter>;

struct Sections {
  std::string_view btf, btf_ext;
};

// .BTF and .BTF.ext of an in-memory ELF64 object (the skeleton's embedded bytes).
std::optional<Sections> find_sections(const void* data, size_t size) {
  auto* base = static_cast<const char*>(data);
  if (size < sizeof(Elf64_Ehdr)) return std::nullopt;
  Elf64_Ehdr eh;
  std::memcpy(&eh, base, sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum || eh.e_shoff > size ||
      (size - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum)
    return std::nullopt;
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, base + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof(sh));
    return sh;
  };
  auto bytes = [&](const Elf64_Shdr& sh) -> std::optional<std::string_view> {
    if (sh.sh_type == SHT_NOBITS || sh.sh_offset > size || sh.sh_size > size - sh.sh_offset) return std::nullopt;
    return std::string_view(base + sh.sh_offset, sh.sh_size);
  };
  auto names = bytes(section(eh.e_shstrndx));
  if (!names) return std::nullopt;
  Sections out;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = section(i);
    if (sh.sh_name >= names->size()) continue;
    std::string_view name = names->substr(sh.sh_name);
    name = name.substr(0, name.find('\0'));
    if (name != ".BTF" && name != ".BTF.ext") continue;
    auto b = bytes(sh);
    if (!b) return std::nullopt;
    (name == ".BTF" ? out.btf : out.btf_ext) = *b;
  }
  return out;
}

// libbpf's bpf_core_essential_name_len: "task_struct___x" -> "task_struct".
std::string_view essential_name(std::string_view name) {
  for (int i = static_cast<int>(name.size()) - 5; i >= 0; --i)
    if (name[i] != '_' && name[i + 1] == '_' && name[i + 2] == '_' && name[i + 3] == '_' && name[i + 4] != '_')
      return name.substr(0, i + 1);
  return name;
}

// Kinds libbpf accepts as candidates for a local type of `kind` (btf_kind_core_compat).
unsigned compatible_kinds(unsigned kind) {
  if (kind == BTF_KIND_ENUM || kind == BTF_KIND_ENUM64) return 1u << BTF_KIND_ENUM | 1u << BTF_KIND_ENUM64;
  return 1u << kind;
}

struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using RootMap = std::unordered_map<std::string, unsigned, NameHash, std::equal_to<>>;

// The CO-RE relocation roots of one object: essential name -> candidate kinds. False when one
// of its relocations could resolve differently against a reduced BTF.
bool collect_roots(const CoreObject& obj, RootMap& roots, std::string& why) {
  auto sections = find_sections(obj.elf, obj.size);
  if (!sections || sections->btf.empty()) {
    why = "no .BTF section";
    return false;
  }
  if (sections->btf_ext.size() < offsetof(BtfExtHeader, core_relo_off)) return true;  // no CO-RE
  BtfExtHeader hdr{};
  std::memcpy(&hdr, sections->btf_ext.data(), std::min(sizeof(hdr), sections->btf_ext.size()));
  if (hdr.magic != kBtfMagic || hdr.hdr_len > sections->btf_ext.size()) {
    why = "unexpected .BTF.ext header";
    return false;
  }
  if (hdr.hdr_len < sizeof(BtfExtHeader) || hdr.core_relo_len == 0) return true;
  std::string_view relos = sections->btf_ext.substr(hdr.hdr_len);
  if (hdr.core_relo_off > relos.size() || hdr.core_relo_len > relos.size() - hdr.core_relo_off) {
    why = "truncated CO-RE relocation section";
    return false;
  }
  relos = relos.substr(hdr.core_relo_off, hdr.core_relo_len);
  BtfPtr local(btf__new(sections->btf.data(), static_cast<uint32_t>(sections->btf.size())));
  if (!local) {
    why = fmt::format("its BTF does not parse ({})", std::strerror(errno));
    return false;
  }
  auto u32 = [&](size_t off) {
    uint32_t v;
    std::memcpy(&v, relos.data() + off, 4);
    return v;
  };
  if (relos.size() < 4) return true;
  uint32_t rec_size = u32(0);
  if (rec_size < sizeof(bpf_core_relo)) {
    why = "unexpected CO-RE relocation record size";
    return false;
  }
  size_t off = 4;
  while (off + 8 <= relos.size()) {
    uint32_t count = u32(off + 4);
    off += 8;
    if (count > (relos.size() - off) / rec_size) {
      why = "truncated CO-RE relocation section";
      return false;
    }
    for (uint32_t i = 0; i < count; ++i, off += rec_size) {
      bpf_core_relo rec;
      std::memcpy(&rec, relos.data() + off, sizeof(rec));
      if (rec.kind == BPF_CORE_TYPE_ID_LOCAL) continue;  // no candidates: the object alone answers
      const btf_type* t = btf__type_by_id(local.get(), rec.type_id);
      if (!t) {
        why = "a CO-RE relocation names a type its BTF lacks";
        return false;
      }
      unsigned kind = btf_kind(t);
      bool field = rec.kind <= BPF_CORE_FIELD_RSHIFT_U64;
      bool enumval = rec.kind == BPF_CORE_ENUMVAL_EXISTS || rec.kind == BPF_CORE_ENUMVAL_VALUE;
      // Type existence/size compare the types themselves: equal at the top level for these
      // kinds, but a typedef or pointer would be compared through the pointers we cut.
      bool type = (rec.kind == BPF_CORE_TYPE_EXISTS || rec.kind == BPF_CORE_TYPE_SIZE) &&
                  (kind == BTF_KIND_STRUCT || kind == BTF_KIND_UNION || kind == BTF_KIND_ENUM ||
                   kind == BTF_KIND_ENUM64 || kind == BTF_KIND_FWD || kind == BTF_KIND_INT || kind == BTF_KIND_FLOAT);
      if (!field && !enumval && !type) {
        // TYPE_ID_TARGET must be the kernel's own id; TYPE_MATCHES walks pointers.
        why = fmt::format("CO-RE relocation kind {} on {}", static_cast<unsigned>(rec.kind),
                          btf__name_by_offset(local.get(), t->name_off));
        return false;
      }
      const char* name = btf__name_by_offset(local.get(), t->name_off);
      if (!name || !*name) continue;  // anonymous: no candidates in any BTF
      roots[std::string(essential_name(name))] |= compatible_kinds(kind);
    }
  }
  return true;
}

// The kernel's BTF. Kernels since 6.16 let /sys/kernel/btf/vmlinux be mapped: ~8 ms instead of
// ~18 ms for libbpf's page-sized reads (the same bytes either way). Elsewhere libbpf's own
// loader, which also knows the other places a vmlinux BTF can be.
BtfPtr load_kernel_btf() {
  int fd = open("/sys/kernel/btf/vmlinux", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st {};
    void* data = fstat(fd, &st) == 0 && st.st_size > 0
                     ? mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0)
                     : MAP_FAILED;
    close(fd);
    if (data != MAP_FAILED) {
      BtfPtr b(btf__new(data, static_cast<uint32_t>(st.st_size)));  // copies what it keeps
      munmap(data, static_cast<size_t>(st.st_size));
      if (b) return b;
    }
  }
  return BtfPtr(btf__load_vmlinux_btf());
}

bool module_btfs_exist() {
  DIR* dir = opendir("/sys/kernel/btf");
  if (!dir) return false;
  bool found = false;
  while (dirent* e = readdir(dir))
    if (e->d_name[0] != '.' && std::strcmp(e->d_name, "vmlinux") != 0) found = true;
  closedir(dir);
  return found;
}

// The types a relocation against `id` can reach: everything embedded by value. Pointers are
// kept, their targets are not.
void mark_closure(const btf* src, uint32_t id, std::vector<char>& keep) {
  std::vector<uint32_t> stack{id};
  while (!stack.empty()) {
    uint32_t cur = stack.back();
    stack.pop_back();
    if (cur == 0 || keep[cur]) continue;
    keep[cur] = 1;
    const btf_type* t = btf__type_by_id(src, cur);
    switch (btf_kind(t)) {
      case BTF_KIND_TYPEDEF:
      case BTF_KIND_CONST:
      case BTF_KIND_VOLATILE:
      case BTF_KIND_RESTRICT:
      case BTF_KIND_TYPE_TAG: stack.push_back(t->type); break;
      case BTF_KIND_ARRAY:
        stack.push_back(btf_array(t)->type);
        stack.push_back(btf_array(t)->index_type);
        break;
      case BTF_KIND_STRUCT:
      case BTF_KIND_UNION: {
        const btf_member* m = btf_members(t);
        for (unsigned i = 0; i < btf_vlen(t); ++i) stack.push_back(m[i].type);
        break;
      }
      default:  // INT, ENUM, ENUM64, FLOAT, FWD: no references; PTR: cut; others: rejected later
        break;
    }
  }
}

// Copies the kept types of `src` into a new BTF, in id order, with references renumbered
// (a pointer to a type not kept becomes void *). Returns null on anything unexpected.
BtfPtr copy_kept(const btf* src, const std::vector<char>& keep, std::string& why) {
  uint32_t n = btf__type_cnt(src);
  std::vector<uint32_t> new_id(n, 0);
  uint32_t next = 0;
  for (uint32_t id = 1; id < n; ++id)
    if (keep[id]) new_id[id] = ++next;
  BtfPtr out(btf__new_empty());
  if (!out) {
    why = "out of memory";
    return nullptr;
  }
  btf* b = out.get();
  for (uint32_t id = 1; id < n; ++id) {
    if (!keep[id]) continue;
    const btf_type* t = btf__type_by_id(src, id);
    const char* name = btf__name_by_offset(src, t->name_off);
    int got = -1;
    switch (btf_kind(t)) {
      case BTF_KIND_INT:
      case BTF_KIND_ENUM:
      case BTF_KIND_ENUM64:
      case BTF_KIND_FLOAT:
      case BTF_KIND_FWD:
        got = btf__add_type(b, src, t);  // no type references: copied as is
        break;
      case BTF_KIND_PTR: got = btf__add_ptr(b, static_cast<int>(new_id[t->type])); break;
      case BTF_KIND_TYPEDEF: got = btf__add_typedef(b, name, static_cast<int>(new_id[t->type])); break;
      case BTF_KIND_CONST: got = btf__add_const(b, static_cast<int>(new_id[t->type])); break;
      case BTF_KIND_VOLATILE: got = btf__add_volatile(b, static_cast<int>(new_id[t->type])); break;
      case BTF_KIND_RESTRICT: got = btf__add_restrict(b, static_cast<int>(new_id[t->type])); break;
      case BTF_KIND_TYPE_TAG: got = btf__add_type_tag(b, name, static_cast<int>(new_id[t->type])); break;
      case BTF_KIND_ARRAY: {
        const struct btf_array* a = btf_array(t);
        got = btf__add_array(b, static_cast<int>(new_id[a->index_type]), static_cast<int>(new_id[a->type]), a->nelems);
        break;
      }
      case BTF_KIND_STRUCT:
      case BTF_KIND_UNION: {
        got = btf_is_struct(t) ? btf__add_struct(b, name, t->size) : btf__add_union(b, name, t->size);
        const btf_member* m = btf_members(t);
        for (unsigned i = 0; got > 0 && i < btf_vlen(t); ++i)
          if (int err = btf__add_field(b, btf__name_by_offset(src, m[i].name_off), static_cast<int>(new_id[m[i].type]),
                                       btf_member_bit_offset(t, i), btf_member_bitfield_size(t, i)))
            got = err;
        break;
      }
      default: why = fmt::format("unexpected BTF kind {} for type {}", btf_kind(t), id); return nullptr;
    }
    if (got != static_cast<int>(new_id[id])) {
      why = fmt::format("copying type {} failed ({})", id, got);
      return nullptr;
    }
  }
  return out;
}

}  // namespace

CoreBtf::~CoreBtf() {
  if (fd_ >= 0) close(fd_);
}

CoreBtf::CoreBtf(CoreBtf&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      served_(std::move(other.served_)),
      note_(std::move(other.note_)) {}

CoreBtf& CoreBtf::operator=(CoreBtf&& other) noexcept {
  std::swap(fd_, other.fd_);
  std::swap(path_, other.path_);
  std::swap(served_, other.served_);
  std::swap(note_, other.note_);
  return *this;
}

const char* CoreBtf::path_for(const std::string& object) const {
  if (path_.empty()) return nullptr;
  return std::find(served_.begin(), served_.end(), object) != served_.end() ? path_.c_str() : nullptr;
}

CoreBtf CoreBtf::build(const std::vector<CoreObject>& objects) {
  CoreBtf out;
  uint64_t begin = host::monotonic_now_ns();
  // Roots per object, so that an object can be left to libbpf on its own.
  std::vector<RootMap> roots(objects.size());
  std::vector<bool> usable(objects.size(), false);
  std::string skipped;
  for (size_t i = 0; i < objects.size(); ++i) {
    std::string why;
    usable[i] = collect_roots(objects[i], roots[i], why);
    if (!usable[i]) skipped += fmt::format("; {}: {}", objects[i].name, why);
  }
  RootMap all;
  for (size_t i = 0; i < objects.size(); ++i)
    if (usable[i])
      for (const auto& [name, kinds] : roots[i]) all[name] |= kinds;
  if (all.empty()) {
    out.note_ = "shared CO-RE BTF: no object needs one" + skipped;
    return out;
  }

  uint64_t parse_begin = host::monotonic_now_ns();
  BtfPtr vmlinux = load_kernel_btf();
  double parse_ms = util::ns_to_ms(host::monotonic_now_ns() - parse_begin);
  if (!vmlinux) {
    out.note_ =
        fmt::format("shared CO-RE BTF: kernel BTF not loaded ({}); each object loads its own", std::strerror(errno));
    return out;
  }
  const btf* src = vmlinux.get();
  uint32_t n = btf__type_cnt(src);
  std::vector<char> keep(n, 0);
  std::unordered_map<std::string_view, bool> found;
  unsigned any_kind = 0;
  for (const auto& [name, kinds] : all) any_kind |= kinds;
  for (uint32_t id = 1; id < n; ++id) {
    const btf_type* t = btf__type_by_id(src, id);
    bool is_int = btf_is_int(t);
    // Most kernel types are functions and their prototypes: no root is one.
    if (!t->name_off || (!(any_kind & (1u << btf_kind(t))) && !is_int)) continue;
    const char* name = btf__name_by_offset(src, t->name_off);
    if (!name || !*name) continue;
    std::string_view full(name);
    // The "long" integers: libbpf reads the pointer size from them (determine_ptr_size).
    if (is_int && (full == "long int" || full == "long unsigned int")) mark_closure(src, id, keep);
    auto it = all.find(essential_name(full));
    if (it == all.end() || !(it->second & (1u << btf_kind(t)))) continue;
    found[it->first] = true;
    mark_closure(src, id, keep);
  }
  // A root missing from vmlinux: libbpf would go on to the module BTFs, which the reduced BTF
  // does not have. Leave those objects to libbpf (only when there are modules with BTF).
  if (module_btfs_exist())
    for (size_t i = 0; i < objects.size(); ++i)
      for (const auto& [name, kinds] : roots[i])
        if (usable[i] && !found.count(name)) {
          usable[i] = false;
          skipped += fmt::format("; {}: {} is not in vmlinux (maybe a module's)", objects[i].name, name);
        }

  std::string why;
  BtfPtr reduced = copy_kept(src, keep, why);
  if (!reduced) {
    out.note_ = "shared CO-RE BTF: " + why + "; each object loads the kernel's";
    return out;
  }
  uint32_t size = 0;
  const void* raw = btf__raw_data(reduced.get(), &size);
  int fd = raw ? memfd_create("ld-core-btf", MFD_CLOEXEC) : -1;
  if (fd < 0) {
    out.note_ = fmt::format("shared CO-RE BTF: no memfd ({}); each object loads the kernel's", std::strerror(errno));
    return out;
  }
  out.fd_ = fd;
  size_t done = 0;
  while (done < size) {
    ssize_t w = write(fd, static_cast<const char*>(raw) + done, size - done);
    if (w <= 0) {
      out.note_ =
          fmt::format("shared CO-RE BTF: writing it failed ({}); each object loads the kernel's", std::strerror(errno));
      return out;
    }
    done += static_cast<size_t>(w);
  }
  out.path_ = fmt::format("/proc/self/fd/{}", fd);
  for (size_t i = 0; i < objects.size(); ++i)
    if (usable[i]) out.served_.push_back(objects[i].name);
  out.note_ = fmt::format(
      "shared CO-RE BTF: {} of {} kernel types ({} KiB) for {} of {} objects in {:.1f} ms "
      "(kernel BTF parsed in {:.1f} ms){}",
      btf__type_cnt(reduced.get()) - 1, n - 1, size / 1024, out.served_.size(), objects.size(),
      util::ns_to_ms(host::monotonic_now_ns() - begin), parse_ms, skipped);
  return out;
}

}  // namespace ld::probes
