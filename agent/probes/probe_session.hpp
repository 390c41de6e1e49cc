// Loads, attaches and reads the BPF probes. The only code that knows libbpf.
//
// RAII: destroying a ProbeSession detaches every link and closes every
// program and map, so nothing stays in the kernel after the agent exits. No
// object is ever pinned, so even a SIGKILL releases everything when the
// kernel closes our file descriptors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/report.hpp"
#include "probes/probe.hpp"
#include "util/time.hpp"

struct ld_hdr;

namespace ld::probes {

class ProbeError : public std::runtime_error {
 public:
  enum class Kind { Permission, Unsupported, Other };
  ProbeError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

struct ProbeOptions {
  std::vector<uint32_t> tgids;
  bool follow_children = false;
  uint32_t ringbuf_bytes = 16u << 20;     // power of two, >= page size
  uint32_t sample_hz = kDefaultSampleHz;  // the perf probe's cpu-clock rate per CPU
  // How often poll() samples in user space (the probes' ticks) and so, in a steady state, how
  // often the agent wakes: see RecordOptions::read_interval_ms.
  uint64_t tick_ns = util::kNsPerSec;
  std::vector<std::string> probes;  // names to enable; empty = every probe of "all"
  bool verbose = false;             // libbpf's own log on stderr
  // Probes from outside the registry (the pipeline benchmark's producer): started like an
  // opt-in registry probe when named in `probes`, after the registry's. Never part of the
  // default set, the CLI's --probes or known_probes().
  std::vector<ProbeInfo> extra_probes;
  HookChoices hooks{};  // which kernel hook each probe takes where there is a choice (probe.hpp)
  // One reduced kernel BTF for every object's CO-RE relocations (core_btf.hpp); false: each
  // object has libbpf parse and search the whole kernel BTF (measuring what it buys).
  bool shared_core_btf = true;
#ifdef LD_FAULT_INJECTION
  // Test builds only (ld_probes_test, tests/CMakeLists.txt; the shipped agent has no such
  // path): faults the root tests inject to reach fallbacks this kernel never needs.
  struct Faults {
    // The typed sched programs attach, then the loader is told they failed (EOPNOTSUPP), as a
    // kernel that refused them would: the fallback to the raw tracepoints.
    bool sched_typed_attach = false;
  } faults{};
#endif
};

// The first kernel feature every probe builds on that this kernel lacks ("" when none), for
// one clear line instead of every probe unavailable with a verifier log of its own. Only a
// clear "no" from the kernel counts: where the check itself cannot run (no permission yet),
// the loaders' own errors speak.
std::string missing_kernel_feature();

using RecordCallback = std::function<void(const ld_hdr& record, size_t size)>;

class ProbeSession {
 public:
  // Loads and attaches; throws ProbeError with a one-line reason and the fix.
  ProbeSession(const ProbeOptions& options, RecordCallback on_record);
  ~ProbeSession();
  ProbeSession(const ProbeSession&) = delete;
  ProbeSession& operator=(const ProbeSession&) = delete;

  // Waits up to timeout_ms (less when a probe's tick is due) for records and hands each to
  // the callback; returns how many. Records held back by the batched wake-up are drained too.
  int poll(int timeout_ms);
  void add_target(uint32_t tgid);
  // Whether a probe may still attach a hook later (Probe::attaches_later).
  bool attaches_later() const;
  // poll() also returns (once) when `fd` becomes readable, e.g. a target's pidfd at its exit,
  // instead of at the end of a read interval. The caller keeps the fd open while polling, and
  // still checks what it waits for at each wake-up: an fd the kernel refuses is only slower.
  // Asked again for the same fd, it re-arms it (a terminal, read at each wake-up).
  void wake_when_readable(int fd);
  // Drains the ring buffer and lets each probe flush what it holds (aggregates, stacks).
  void finish();
  // Drops every record from now on: the sinks may be gone while the probes detach.
  void stop_delivery();
  std::vector<model::ProbeStatus> status() const;

  static std::vector<std::string> known_probes();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Mounts tracefs at /sys/kernel/tracing when no tracefs is reachable (tracepoint
// attachment reads event ids from it). Returns a note for the user, or "".
std::string ensure_tracefs();

}  // namespace ld::probes
