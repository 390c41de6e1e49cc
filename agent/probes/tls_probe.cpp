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
#include <unistd.h>

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
  static const std::set<std::string> names = [] {
    std::set<std::string> out;
    for (const EntryPoint& ep : kEntryPoints) out.insert(ep.symbol);
    return out;
  }();
  return names;
}

struct Library {
  std::string path;  // as in /proc/PID/maps
  size_t attached = 0;
  std::string error;
};

struct Proc {
  uint32_t tgid = 0;
  uint64_t added_ns = 0, next_search_ns = 0;
  uint32_t searches = 0;
  bool searching = true, gone = false;
  std::set<std::string> looked_at;  // files whose symbols were read (with or without OpenSSL)
  std::vector<Library> libs;        // those that export OpenSSL's entry points
  std::vector<bpf_link*> links;
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
    const bool no_tls_for_good = std::all_of(procs_.begin(), procs_.end(), [&](const auto& kv) {
      return kv.second.libs.empty() && past_search_window(kv.first, now);
    });
    if (!procs_.empty() && no_tls_for_good)
      throw ProbeUnavailable("no OpenSSL (libssl.so, or an executable exporting SSL_write) in the target's mappings");
    if (auto why = every_attach_failed()) throw ProbeUnavailable(*why);
  }

  void tick(uint64_t now, const EmitFn&) override {
    for (auto& [tgid, p] : procs_) step(p, now);
  }

  void add_target(uint32_t tgid) override { track(tgid, host::monotonic_now_ns()); }

  bool attaches_later() const override {
    return std::any_of(procs_.begin(), procs_.end(), [](const auto& kv) { return kv.second.searching; });
  }

  std::string detail() const override {
    const bool hooked =
        std::any_of(procs_.begin(), procs_.end(), [](const auto& kv) { return !kv.second.libs.empty(); });
    std::string head = hooked ? "uprobes on OpenSSL's SSL_write/SSL_write_ex/SSL_read/SSL_read_ex, plaintext "
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
    std::string maps = read_process_maps(p.tgid, now);
    if (maps.empty()) {
      p.gone = true;
      p.searching = false;
      return;
    }
    for (const std::string& path : openssl_candidates(maps)) {
      if (p.looked_at.insert(path).second) attach_file(p, path);
    }
    const uint64_t until = p.added_ns + kSearchForNs;
    p.searching = p.libs.empty() && now < until;
    p.next_search_ns = next_look_ns(now, p.searches, until);
  }

  // Every entry point `path` exports, the read's return probe before its entry probe: a thread
  // entering SSL_read between the two attaches must not leave a read open that no return ends.
  void attach_file(Proc& p, const std::string& path) {
    const std::string file = fmt::format("/proc/{}/root{}", p.tgid, path);
    auto symbols = find_dynamic_symbols(file, entry_point_names());
    if (symbols.empty()) return;  // an executable without OpenSSL in it: nothing to say
    Library lib;
    lib.path = path;
    std::set<uint64_t> offsets;  // an alias exported twice is attached once
    for (const EntryPoint& ep : kEntryPoints) {
      auto it = symbols.find(ep.symbol);
      if (it == symbols.end() || !offsets.insert(it->second.file_offset).second) continue;
      if (int err = attach_entry_point(p, file, ep, it->second.file_offset)) {
        lib.error = fmt::format("uprobe on {} failed: {}", ep.symbol, std::strerror(-err));
        break;
      }
      ++lib.attached;
    }
    p.libs.push_back(std::move(lib));
  }

  // 0, or the -errno of the failed attach (nothing of this entry point is left attached).
  int attach_entry_point(Proc& p, const std::string& file, const EntryPoint& ep, uint64_t offset) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = ep.api, .retprobe = true);
    const int pid = static_cast<int>(p.tgid);
    bpf_link* ret = nullptr;
    if (ep.read) {
      ret = bpf_program__attach_uprobe_opts(skel_->progs.ld_tls_read_return, pid, file.c_str(), offset, &opts);
      if (!ret) return -errno;
    }
    opts.retprobe = false;
    bpf_program* entry = ep.read ? skel_->progs.ld_tls_read_entry : skel_->progs.ld_tls_write;
    bpf_link* in = bpf_program__attach_uprobe_opts(entry, pid, file.c_str(), offset, &opts);
    if (!in) {
      const int err = -errno;
      if (ret) bpf_link__destroy(ret);
      return err;
    }
    if (ret) p.links.push_back(ret);
    p.links.push_back(in);
    return 0;
  }

  void detach(Proc& p) {
    for (bpf_link* l : p.links) bpf_link__destroy(l);
    p.links.clear();
  }

  void step(Proc& p, uint64_t now) {
    if (p.gone) return;
    if (p.searching && now >= p.next_search_ns) search(p, now);
    if (access(fmt::format("/proc/{}", p.tgid).c_str(), F_OK) != 0) {
      detach(p);
      p.gone = true;
      p.searching = false;
    }
  }

  // The reason when OpenSSL was found but no entry point of it could be attached (no uprobe
  // support): the probe cannot work here.
  std::optional<std::string> every_attach_failed() const {
    std::optional<std::string> why;
    for (const auto& [tgid, p] : procs_)
      for (const Library& l : p.libs) {
        if (l.attached) return std::nullopt;
        if (!why) why = fmt::format("{}: {}", l.path, l.error);
      }
    return why;
  }

  std::string describe(const Proc& p) const {
    std::string libs;
    for (const Library& l : p.libs) {
      libs += libs.empty() ? "" : ", ";
      libs += l.error.empty() ? fmt::format("{} ({} entry points)", l.path, l.attached)
                              : fmt::format("{} ({} entry points; {})", l.path, l.attached, l.error);
    }
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
