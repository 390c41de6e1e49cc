// tls: the plaintext classes of the targets' TLS writes and reads (bpf/tls.bpf.c), from uprobes
// on OpenSSL 3's SSL_write/SSL_write_ex (entry) and SSL_read/SSL_read_ex (entry and return), so
// that a server terminating TLS itself still shows requests and tokens (analysis/tls_join.hpp
// gives each class to the ciphertext send or receive of the same thread).
//
// Per process: the libssl.so* it maps (in any directory), and its executable where that
// exports the functions (a binary with OpenSSL linked in, such as Node). Servers load libssl
// when they first set up TLS (Python's `import ssl`), so a process is looked at again through
// the first 10 s after it is first seen (process_search.hpp), as the cuda and gil probes do. A
// process without TLS costs nothing: nothing is attached to it.
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "events.h"
#include "host/host_facts.hpp"
#include "probes/elf_symbols.hpp"
#include "probes/libbpf_util.hpp"
#include "probes/library_uprobes.hpp"
#include "probes/probe.hpp"
#include "probes/process_search.hpp"
#include "tls.skel.h"

namespace ld::probes {
namespace {

constexpr size_t kMaxProcs = 256;

struct EntryPoint {
  const char* symbol;
  uint16_t api;  // enum ld_tls_api: the attach cookie
  bool read;     // an entry and a return probe; a write has the entry only
};

constexpr EntryPoint kEntryPoints[] = {
    {"SSL_write", LD_TLS_SSL_WRITE, false},
    {"SSL_write_ex", LD_TLS_SSL_WRITE_EX, false},
    {"SSL_read", LD_TLS_SSL_READ, true},
    {"SSL_read_ex", LD_TLS_SSL_READ_EX, true},
};

const std::set<std::string>& entry_point_names() {
  static const std::set<std::string> names = entry_point_symbols(kEntryPoints);
  return names;
}

// libs: the files that export OpenSSL's entry points.
struct Proc : UprobeProc {
  std::set<std::string> looked_at;  // files whose symbols were read (with or without OpenSSL)
};

class TlsProbe : public Probe {
 public:
  TlsProbe() = default;
  TlsProbe(const TlsProbe&) = delete;
  TlsProbe& operator=(const TlsProbe&) = delete;
  ~TlsProbe() override {
    for (auto& [tgid, p] : procs_) detach(p);
  }

  const void* bpf_object_elf(size_t* size) const override { return tls_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    skel_.reset(tls_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("tls", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    skel_->rodata->ld_ssl_id_key = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
    if (int err = tls_bpf__load(skel_.get())) throw_libbpf_error("tls", "loading", err);
    const uint64_t now = host::monotonic_now_ns();
    for (uint32_t tgid : ctx.options.tgids) track(tgid, now);
    if (nothing_found_for_good(procs_, now))
      throw ProbeUnavailable("no OpenSSL (libssl.so, or an executable exporting SSL_write) in the target's mappings");
    if (auto why = every_attach_failed(procs_)) throw ProbeUnavailable(*why);
  }

  void tick(uint64_t now, const EmitFn&) override {
    for (auto& [tgid, p] : procs_) step(p, now);
  }

  void add_target(uint32_t tgid) override { track(tgid, host::monotonic_now_ns()); }

  bool attaches_later() const override { return any_searching(procs_); }

  std::string detail() const override {
    std::string head = any_library_found(procs_)
                           ? "uprobes on OpenSSL's SSL_write/SSL_write_ex/SSL_read/SSL_read_ex, plaintext "
                             "classified in-kernel"
                           : "nothing hooked: no target mapped OpenSSL (libssl.so) during the trace";
    return per_process_detail(std::move(head), procs_, [&](const Proc& p) { return describe(p); });
  }

 private:
  void track(uint32_t tgid, uint64_t now) {
    if (Proc* p = add_process(procs_, tgid, now, kMaxProcs)) search(*p, now);
  }

  // Attaches OpenSSL in the files the process maps that were not looked at yet; schedules the
  // next look while the window is open and no OpenSSL was found.
  void search(Proc& p, uint64_t now) {
    const std::string maps = maps_or_gone(p, now);
    if (maps.empty()) return;
    for (const std::string& path : openssl_candidates(maps)) {
      if (p.looked_at.insert(path).second) attach_file(p, path);
    }
    const uint64_t until = p.added_ns + kSearchForNs;
    p.searching = p.libs.empty() && now < until;
    p.next_search_ns = next_look_ns(now, p.searches, until);
  }

  // Every entry point `path` exports (a read with its return probe: attach_entry_point).
  void attach_file(Proc& p, const std::string& path) {
    const std::string file = fmt::format("/proc/{}/root{}", p.tgid, path);
    auto symbols = find_dynamic_symbols(file, entry_point_names());
    if (symbols.empty()) return;  // an executable without OpenSSL in it: nothing to say
    UprobeLibrary lib;
    lib.path = path;
    std::set<uint64_t> offsets;  // an alias exported twice is attached once
    for (const EntryPoint& ep : kEntryPoints) {
      auto it = symbols.find(ep.symbol);
      if (it == symbols.end() || !offsets.insert(it->second.file_offset).second) continue;
      bpf_program* entry = ep.read ? skel_->progs.ld_tls_read_entry : skel_->progs.ld_tls_write;
      bpf_program* ret = ep.read ? skel_->progs.ld_tls_read_return : nullptr;
      if (int err = attach_entry_point(p, file, it->second.file_offset, ep.api, entry, ret)) {
        lib.error = fmt::format("uprobe on {} failed: {}", ep.symbol, std::strerror(-err));
        break;
      }
      ++lib.attached;
    }
    p.libs.push_back(std::move(lib));
  }

  void step(Proc& p, uint64_t now) {
    if (p.gone) return;
    if (p.searching && now >= p.next_search_ns) search(p, now);
    forget_if_exited(p);
  }

  std::string describe(const Proc& p) const {
    std::string libs = describe_libraries(p);
    if (libs.empty())
      libs = p.searching ? "no OpenSSL yet (looked at again for 10 s: servers load it when they set up TLS)"
                         : "no OpenSSL (libssl.so, or an executable exporting SSL_write) in its mappings";
    return p.gone ? libs + "; exited" : libs;
  }

  SkelPtr<tls_bpf, tls_bpf__destroy> skel_;
  std::map<uint32_t, Proc> procs_;
};

}  // namespace

std::unique_ptr<Probe> make_tls_probe() { return std::make_unique<TlsProbe>(); }

}  // namespace ld::probes
