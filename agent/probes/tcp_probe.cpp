// tcp: connection churn of the targets (set-up, TIME_WAIT, close, retransmits) from
// sock:inet_sock_set_state and tcp:tcp_retransmit_*, plus the namespace-wide counters of
// /proc/PID/net/{netstat,snmp,sockstat} (listen overflows, TIME_WAIT count) every read
// interval (--read-interval; at least a second apart).
#include <sys/random.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "events.h"
#include "host/host_facts.hpp"
#include "host/procnet.hpp"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "tcp.skel.h"
#include "util/files.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

// At each tick (the read interval), at most once a second: generating /proc/PID/net/netstat
// is not free, and a window's counters are bracketed by the samples around it either way.
constexpr uint64_t kSampleEveryNs = util::kNsPerSec;
// Listening ports are scanned only at attach and for a new target: the kernel side follows
// a target's listen() and close() of a listener itself. A scan reads /proc/PID/net/tcp{,6},
// which walks the whole established hash (262k buckets with 24 GiB of RAM: ~5 ms of agent
// CPU a scan, most of the agent's CPU when it ran every 5 s), and every fd link of the
// targets.

uint64_t random_u64() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof(value), 0) != sizeof(value)) value = 0x9e3779b97f4a7c15ULL;
  return value;
}

class TcpProbe : public Probe {
 public:
  const void* bpf_object_elf(size_t* size) const override { return tcp_bpf__elf_bytes(size); }

  void start(ProbeContext& ctx) override {
    targets_.assign(ctx.options.tgids.begin(), ctx.options.tgids.end());
    skel_.reset(tcp_bpf__open_opts(ctx.open_opts));
    if (!skel_) throw_libbpf_error("tcp", "opening", errno);
    use_shared_maps(skel_->obj, ctx.shared);
    skel_->rodata->ld_sock_id_key = random_u64();
    if (int err = tcp_bpf__load(skel_.get())) throw_libbpf_error("tcp", "loading", err);
    // Before attaching: connections to listeners that already exist match from the start.
    scan_listening_ports();
    if (int err = tcp_bpf__attach(skel_.get())) throw_libbpf_error("tcp", "attaching", err);
    // The baseline: counters are cumulative, a reader wants the value at attach.
    uint64_t now = host::monotonic_now_ns();
    sample_counters(now, ctx.emit);
    next_sample_ = now + kSampleEveryNs;
  }

  void tick(uint64_t now, const EmitFn& emit) override {
    if (now >= next_sample_) {
      next_sample_ = now + kSampleEveryNs;
      sample_counters(now, emit);
    }
    if (rescan_ports_) {
      rescan_ports_ = false;
      scan_listening_ports();
    }
  }

  void finish(const EmitFn& emit) override { sample_counters(host::monotonic_now_ns(), emit); }

  void add_target(uint32_t tgid) override {
    targets_.push_back(tgid);
    rescan_ports_ = true;
  }

  uint64_t user_records() const override { return user_records_; }

  std::string detail() const override {
    return fmt::format(
        "sock:inet_sock_set_state + tcp:tcp_retransmit_skb/synack on target sockets and "
        "listening ports ({} found at start); /proc/PID/net counters every read interval; TIME_WAIT "
        "entry inferred from FIN_WAIT2/CLOSING -> CLOSE",
        ports_at_start_);
  }

 private:
  // Keeps ld_tcp_ports = the listening ports of the live targets (plus the ones the kernel
  // side adds itself at listen()).
  void scan_listening_ports() {
    std::set<uint16_t> now;
    for (uint32_t tgid : targets_)
      for (uint16_t port : host::listening_ports_of("", int(tgid))) now.insert(port);
    int fd = bpf_map__fd(skel_->maps.ld_tcp_ports);
    uint8_t one = 1;
    for (uint16_t port : now) bpf_map_update_elem(fd, &port, &one, BPF_ANY);
    for (uint16_t port : scanned_ports_)
      if (!now.count(port)) bpf_map_delete_elem(fd, &port);
    if (!started_) ports_at_start_ = now.size();
    started_ = true;
    scanned_ports_ = std::move(now);
  }

  // One ld_net_sample per network namespace of the targets (read through /proc/PID/net so
  // a target in a container is measured in its own namespace).
  void sample_counters(uint64_t now, const EmitFn& emit) {
    std::set<std::string> seen;
    for (uint32_t tgid : targets_) {
      std::string ns = host::net_namespace_of("", int(tgid));
      int from = int(tgid);
      if (ns.empty()) {
        // The target is gone (the last sample at finish() usually is after its exit): its
        // namespace can still be read through us when we share it.
        auto known = netns_.find(tgid);
        if (known == netns_.end() || known->second != host::net_namespace_of("", getpid())) continue;
        ns = known->second;
        from = getpid();
      }
      netns_[tgid] = ns;
      if (!seen.insert(ns).second) continue;
      auto c = host::read_net_counters("", from, net_files_.reader());
      if (!c) continue;
      ld_net_sample rec{};
      rec.hdr.type = LD_EV_NET_SAMPLE;
      rec.hdr.size = sizeof(rec);
      rec.hdr.tgid = tgid;
      rec.hdr.tid = tgid;
      rec.hdr.ts_ns = now;
      rec.listen_overflows = c->listen_overflows;
      rec.listen_drops = c->listen_drops;
      rec.tcp_timewait = c->tcp_timewait;
      rec.retrans_segs = c->retrans_segs;
      rec.active_opens = c->active_opens;
      rec.passive_opens = c->passive_opens;
      emit(rec.hdr, sizeof(rec));
      user_records_++;
    }
  }

  util::FileCache net_files_;  // /proc/PID/net/{netstat,snmp,sockstat}, kept open
  SkelPtr<tcp_bpf, tcp_bpf__destroy> skel_;
  std::vector<uint32_t> targets_;
  std::set<uint16_t> scanned_ports_;
  std::map<uint32_t, std::string> netns_;  // tgid -> "net:[inode]" last seen
  size_t ports_at_start_ = 0;
  bool started_ = false;
  uint64_t next_sample_ = 0;
  bool rescan_ports_ = false;  // a new target: its listeners may predate it
  uint64_t user_records_ = 0;
};

}  // namespace

std::unique_ptr<Probe> make_tcp_probe() { return std::make_unique<TcpProbe>(); }

}  // namespace ld::probes
