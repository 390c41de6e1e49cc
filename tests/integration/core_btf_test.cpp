// Root tier: the shared CO-RE BTF (probes/core_btf.hpp). Every probe's object, loaded with the
// reduced BTF, must be the very program libbpf makes from the whole vmlinux BTF: the same
// relocated instructions, program by program (map fds aside).
#include <linux/bpf.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probe_test_util.hpp"
#include "probes/core_btf.hpp"
#include "probes/probe.hpp"
#include "probes/probe_session.hpp"

namespace {

using ld::probes::CoreBtf;
using ld::probes::CoreObject;

struct ObjDeleter {
  void operator()(bpf_object* o) const { bpf_object__close(o); }
};
using ObjPtr = std::unique_ptr<bpf_object, ObjDeleter>;

std::vector<CoreObject> probe_objects(std::vector<std::unique_ptr<ld::probes::Probe>>& keep) {
  std::vector<CoreObject> objects;
  for (const auto& info : ld::probes::probe_registry()) {
    keep.push_back(info.make());
    size_t size = 0;
    if (const void* elf = keep.back()->bpf_object_elf(&size)) objects.push_back({info.name, elf, size});
  }
  return objects;
}

// Opens and loads `obj` with its own maps; btf_path null = libbpf's default (vmlinux). Typed
// tracepoint programs this kernel has no tracepoint for are left out, as their probes do.
ObjPtr load(const CoreObject& obj, const char* btf_path) {
  std::string name = obj.name + "_bpf";
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = name.c_str(), .btf_custom_path = btf_path);
  ObjPtr o(bpf_object__open_mem(obj.elf, obj.size, &opts));
  if (!o) return nullptr;
  bpf_program* prog = nullptr;
  const std::string typed = "tp_btf/";
  while ((prog = bpf_object__next_program(o.get(), prog))) {
    std::string section = bpf_program__section_name(prog);
    if (section.starts_with(typed) && !ld::test::kernel_has_typed_tracepoint(section.substr(typed.size())))
      bpf_program__set_autoload(prog, false);
  }
  if (bpf_map* events = bpf_object__find_map_by_name(o.get(), "ld_events")) bpf_map__set_max_entries(events, 4096);
  if (bpf_object__load(o.get()) != 0) return nullptr;
  return o;
}

// The program's instructions after loading, with the map fds of ldimm64 zeroed.
std::vector<bpf_insn> relocated(const bpf_program* prog) {
  const bpf_insn* insns = bpf_program__insns(prog);
  std::vector<bpf_insn> out(insns, insns + bpf_program__insn_cnt(prog));
  for (size_t i = 0; i + 1 < out.size(); ++i)
    if (out[i].code == (BPF_LD | BPF_IMM | BPF_DW)) {
      if (out[i].src_reg == BPF_PSEUDO_MAP_FD || out[i].src_reg == BPF_PSEUDO_MAP_VALUE) out[i].imm = 0;
      ++i;  // the second half
    }
  return out;
}

bool same(const bpf_insn& a, const bpf_insn& b) {
  return a.code == b.code && a.dst_reg == b.dst_reg && a.src_reg == b.src_reg && a.off == b.off && a.imm == b.imm;
}

}  // namespace

TEST(ProbeCoreBtf, EveryObjectRelocatesExactlyAsWithTheWholeKernelBtf) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::unique_ptr<ld::probes::Probe>> keep;
  auto objects = probe_objects(keep);
  ASSERT_GE(objects.size(), 10u);
  CoreBtf core = CoreBtf::build(objects);
  for (const auto& obj : objects) {
    SCOPED_TRACE(obj.name);
    // On this kernel (no module BTF, only the relocation kinds we handle) every object is served.
    const char* path = core.path_for(obj.name);
    ASSERT_NE(path, nullptr) << core.note();
    ObjPtr whole = load(obj, nullptr);
    ObjPtr reduced = load(obj, path);
    ASSERT_TRUE(whole && reduced);
    size_t programs = 0;
    bpf_program* a = nullptr;
    while ((a = bpf_object__next_program(whole.get(), a))) {
      if (!bpf_program__autoload(a)) continue;
      SCOPED_TRACE(bpf_program__name(a));
      const bpf_program* b = bpf_object__find_program_by_name(reduced.get(), bpf_program__name(a));
      ASSERT_NE(b, nullptr);
      auto x = relocated(a), y = relocated(b);
      ASSERT_EQ(x.size(), y.size());
      for (size_t i = 0; i < x.size(); ++i) ASSERT_TRUE(same(x[i], y[i])) << "instruction " << i;
      programs++;
    }
    EXPECT_GT(programs, 0u);
  }
}

TEST(ProbeCoreBtf, IsSmallAndAnObjectItCannotReadKeepsTheDefault) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::unique_ptr<ld::probes::Probe>> keep;
  auto objects = probe_objects(keep);
  static const char junk[] = "\177ELF but not really an object";
  objects.push_back({"junk", junk, sizeof(junk)});
  CoreBtf core = CoreBtf::build(objects);
  EXPECT_EQ(core.path_for("junk"), nullptr);
  const char* path = core.path_for("sock");
  ASSERT_NE(path, nullptr) << core.note();
  std::unique_ptr<btf, void (*)(btf*)> reduced(btf__parse(path, nullptr), btf__free);
  ASSERT_TRUE(reduced);
  std::unique_ptr<btf, void (*)(btf*)> vmlinux(btf__load_vmlinux_btf(), btf__free);
  ASSERT_TRUE(vmlinux);
  // A few hundred types instead of the kernel's ~100k: what made each load slow.
  EXPECT_LT(btf__type_cnt(reduced.get()) * 20, btf__type_cnt(vmlinux.get())) << core.note();
  EXPECT_GT(btf__find_by_name_kind(reduced.get(), "task_struct", BTF_KIND_STRUCT), 0);
}

// ProbeOptions::shared_core_btf = false (what the reduced BTF is measured against): every
// object relocates against the whole kernel BTF through libbpf, and the probes attach as before.
TEST(ProbeCoreBtf, ProbesAttachWithoutIt) {
  if (auto why = ld::test::bpf_skip_reason(); !why.empty()) GTEST_SKIP() << why;
  ld::probes::ensure_tracefs();
  ld::probes::ProbeOptions options;
  options.tgids = {uint32_t(getpid())};
  options.probes = {"sock", "sched", "memory"};
  options.shared_core_btf = false;
  ld::probes::ProbeSession session(options, [](const ld_hdr&, size_t) {});
  for (const auto& p : session.status())
    if (p.name == "sock" || p.name == "sched" || p.name == "memory") {
      EXPECT_EQ(p.status, ld::model::ProbeState::kAttached) << p.name << ": " << p.reason;
    }
}
