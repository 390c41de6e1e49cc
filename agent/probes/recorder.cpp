#include "probes/recorder.hpp"

#include <dirent.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "events.h"
#include "host/host_facts.hpp"
#include "host/peers.hpp"
#include "probes/privileges.hpp"
#include "probes/probe_session.hpp"
#include "trace/trace_file.hpp"
#include "trace/trace_header.hpp"
#include "util/time.hpp"

namespace ld::probes {
namespace {

volatile sig_atomic_t g_stop = 0;

void on_stop_signal(int) { g_stop = 1; }

// A pidfd becomes readable when the process exits: no polling of /proc, no pid reuse race.
class PidWatch {
 public:
  explicit PidWatch(int pid) : pid_(pid), fd_(static_cast<int>(syscall(SYS_pidfd_open, pid, 0))) {}
  ~PidWatch() {
    if (fd_ >= 0) close(fd_);
  }
  PidWatch(const PidWatch&) = delete;
  PidWatch(PidWatch&& o) noexcept : pid_(o.pid_), fd_(o.fd_) { o.fd_ = -1; }
  int fd() const { return fd_; }
  bool exited() const {
    if (fd_ < 0) return !host::read_process(pid_).has_value();
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

 private:
  int pid_;
  int fd_;
};

void validate_pids(const std::vector<int>& pids) {
  if (pids.empty()) throw std::invalid_argument("no --pid given");
  for (int pid : pids) {
    if (pid <= 0) throw std::invalid_argument(fmt::format("--pid {}: not a process id", pid));
    if (pid == getpid()) throw std::invalid_argument(fmt::format("--pid {}: that is latency-doctor itself", pid));
  }
}

trace::TraceHeader make_header(const RecordOptions& options, const std::vector<uint32_t>& tgids, uint64_t start_mono,
                               int64_t offset) {
  auto first = host::read_process(options.pids.front());
  trace::TraceHeader header;
  header.agent_version = LD_VERSION;
  header.record_layout_version = LD_RECORD_LAYOUT_VERSION;
  header.created_unix_ns = host::realtime_now_ns();
  header.realtime_minus_monotonic_ns = offset;
  header.start_mono_ns = start_mono;
  for (uint32_t t : tgids) header.target.pids.push_back(static_cast<int>(t));
  header.target.comm = first ? first->comm : "";
  header.target.exe = first ? first->exe : "";
  header.target_start_mono_ns = first ? first->start_mono_ns : 0;
  header.children = options.children;
  // The host as it was when recorded (sysctls, governor, cgroup limits): findings quote these
  // current values, and `report` on another machine must not read its own.
  header.host = host::host_facts_json();
  if (options.host_facts) header.host["facts"] = options.host_facts(options.pids.front());
  if (auto machine = header.host.find("machine"); machine != header.host.end() && machine->is_string())
    header.machine = *machine;
  header.token_source = options.token_source;
  header.duration_requested_ms = options.duration_ms;
  header.probes_requested = options.probes.empty() ? std::vector<std::string>{"default"} : options.probes;
  return header;
}

class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1) {}
  void tick(uint64_t now, uint64_t start, uint64_t duration_ms, const std::string& status) {
    if (quiet_) return;
    uint64_t every = tty_ ? util::kNsPerSec : 10 * util::kNsPerSec;
    if (now < last_ + every) return;
    last_ = now;
    double elapsed = util::ns_to_s(now - start);
    std::string when = duration_ms ? fmt::format("{:.0f}s/{:.0f}s", elapsed, util::ms_to_s(duration_ms))
                                   : fmt::format("{:.0f}s (Ctrl-C to stop)", elapsed);
    std::string line = fmt::format("recording {}{}", when, status.empty() ? "" : ", " + status);
    if (tty_) fmt::print(stderr, "\r\033[K{}", line);
    else fmt::print(stderr, "{}\n", line);
    shown_ = true;
  }
  ~Progress() {
    if (shown_ && tty_) fmt::print(stderr, "\n");
  }

 private:
  bool quiet_;
  bool tty_;
  bool shown_ = false;
  uint64_t last_ = 0;
};

}  // namespace

namespace {

// Every thread of the agent becomes SCHED_BATCH once attached: the same CPU share as before
// (nothing the ring buffers need is taken away), but a waking agent thread no longer preempts
// the server's threads, which on a busy 2-CPU host showed up in the p99 of token gaps. Linux
// lets an unprivileged thread move itself from SCHED_OTHER to SCHED_BATCH.
std::string yield_to_target() {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return "could not list the agent's threads to lower their scheduling class";
  std::string problem;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
    sched_param param{};
    if (sched_setscheduler(tid, SCHED_BATCH, &param) != 0 && problem.empty())
      problem = fmt::format("could not make agent thread {} SCHED_BATCH: {}", tid, std::strerror(errno));
  }
  closedir(dir);
  return problem;
}

// The trailer's "agent": what recording cost, shown in every report (model::AgentCost). The
// recording runs from attached to stopped; stopping (the last drain, the probes' finish:
// kernel stacks symbolised from /proc/kallsyms) is counted apart. Rounded to the microsecond.
model::AgentCost agent_cost(double attach_ms, const OwnUsage& before_attach, const OwnUsage& attached,
                            uint64_t attached_ns, const OwnUsage& stopped, uint64_t stopped_ns,
                            const OwnUsage& finished) {
  auto round3 = [](double v) { return std::round(v * 1000) / 1000; };
  model::AgentCost cost;
  cost.known = true;
  cost.attach_ms = round3(attach_ms);
  cost.attach_cpu_ms = round3(attached.cpu_ms - before_attach.cpu_ms);
  cost.recording_ms = round3(util::ns_to_ms(stopped_ns - attached_ns));
  cost.cpu_ms = round3(stopped.cpu_ms - attached.cpu_ms);
  cost.wakeups = stopped.voluntary_switches - attached.voluntary_switches;
  cost.stop_cpu_ms = round3(finished.cpu_ms - stopped.cpu_ms);
  cost.peak_rss_mib = round3(finished.max_rss_mib);
  return cost;
}

}  // namespace

// The agent's own use of the machine so far (all its threads, exited ones included).
OwnUsage own_usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {util::timeval_ms(u.ru_utime) + util::timeval_ms(u.ru_stime), static_cast<uint64_t>(u.ru_nvcsw),
          static_cast<double>(u.ru_maxrss) / 1024.0};
}

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: the ring-buffer poll must return at once
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_stop != 0; }
void request_stop() { g_stop = 1; }

RecordResult record(const RecordOptions& options, const LiveSink& live, const StatusLine& status) {
  validate_pids(options.pids);
  std::vector<PidWatch> watches;
  std::vector<uint32_t> tgids;
  for (int pid : options.pids) {
    if (!host::read_process(pid))
      throw std::runtime_error(fmt::format("no process with pid {} (it exited, or never existed)", pid));
    watches.emplace_back(pid);
    tgids.push_back(static_cast<uint32_t>(pid));
  }
  std::vector<model::FollowedProcess> followed;
  if (options.follow) {
    for (const host::Peer& peer : host::server_peers(options.pids)) {
      tgids.push_back(static_cast<uint32_t>(peer.pid));
      followed.push_back({peer.pid, peer.comm, peer.why});
    }
  } else if (options.children) {
    for (int pid : options.pids)
      for (int child : host::descendants(pid)) tgids.push_back(static_cast<uint32_t>(child));
  }

  RecordResult result;
  if (auto note = ensure_tracefs(); !note.empty()) result.warnings.push_back(note);

  const int64_t offset = host::sample_realtime_minus_monotonic_ns();
  std::unique_ptr<trace::TraceWriter> writer;
  ProbeOptions probe_options{.tgids = tgids,
                             .follow_children = options.children,
                             .ringbuf_bytes = options.ringbuf_bytes,
                             .sample_hz = options.sample_hz,
                             .tick_ns = options.read_interval_ms * util::kNsPerMs,
                             .probes = options.probes,
                             .verbose = options.verbose,
                             .extra_probes = options.extra_probes,
                             .hooks = options.hooks};
  std::string write_error;
  auto sink = [&](const ld_hdr& rec, size_t size) {
    if (writer && write_error.empty()) {
      try {
        writer->append(&rec, size);
      } catch (const std::exception& e) {
        write_error = e.what();  // keep analysing live; the report says the trace is incomplete
      }
    }
    live(rec, size);
  };
  // The trace file exists before the first event can arrive, so that the trace holds every
  // record the live analysis sees: `report FILE` then gives the report `attach` gave.
  const uint64_t start = host::monotonic_now_ns();
  result.header = make_header(options, tgids, start, offset);
  result.header.target.followed = followed;
  if (!options.trace_path.empty())
    writer = std::make_unique<trace::TraceWriter>(options.trace_path, trace::to_json(result.header));
  if (options.on_start) {
    try {
      options.on_start(result.header);
    } catch (...) {
      if (writer) {
        writer.reset();
        unlink(options.trace_path.c_str());
      }
      throw;
    }
  }
  std::shared_ptr<ProbeSession> session_owner;
  const OwnUsage usage_before_attach = own_usage();
  const uint64_t attach_begin = host::monotonic_now_ns();
  try {
    session_owner = std::make_shared<ProbeSession>(probe_options, sink);
  } catch (...) {
    // A trace with a header and nothing else would only confuse: remove it.
    if (writer) {
      writer.reset();
      unlink(options.trace_path.c_str());
    }
    throw;
  }
  ProbeSession& session = *session_owner;
  const double attach_ms = util::ns_to_ms(host::monotonic_now_ns() - attach_begin);
  // A target's exit ends the wait at once rather than at the end of a read interval (exited()
  // below is still asked at each wake-up, for a pid without a pidfd too).
  for (const auto& w : watches)
    if (w.fd() >= 0) session.wake_when_readable(w.fd());
  if (options.children) {
    // Children forked between the scan above and the fork hook's attachment: scan again.
    for (int pid : options.pids)
      for (int child : host::descendants(pid))
        if (std::find(tgids.begin(), tgids.end(), static_cast<uint32_t>(child)) == tgids.end()) {
          tgids.push_back(static_cast<uint32_t>(child));
          session.add_target(static_cast<uint32_t>(child));
        }
  }
  // From here on we only read: give up what loading and attaching needed. Following
  // children keeps the right to attach probes to the new processes, and so does a probe that
  // attaches later (the GIL's uprobe for a Python not learned yet) until it no longer may.
  if (auto note = yield_to_target(); !note.empty()) result.warnings.push_back(note);
  bool attach_caps_kept = options.children || options.keep_running || session.attaches_later();
  if (auto note = drop_capabilities(attach_caps_kept); !note.empty()) result.warnings.push_back(note);
  // Loading parsed the kernel's BTF and ten objects on several threads; glibc keeps what they
  // freed in its heaps. Hand it back: the agent left on a server maps only what it uses (on a
  // shadow-paging VM every mapped page is also work at each switch-in: docs/performance.md).
  malloc_trim(0);
  const OwnUsage usage_attached = own_usage();
  const uint64_t attached_ns = host::monotonic_now_ns();
  if (!options.quiet) {
    auto first = host::read_process(options.pids.front());
    fmt::print(stderr, "latency-doctor: attached to pid {}{} ({} process(es)) in {:.0f} ms; tracing {}\n",
               options.pids.front(), first ? " (" + first->comm + ")" : "", tgids.size(), attach_ms,
               options.duration_ms ? fmt::format("for {:.1f}s, Ctrl-C stops early and still reports",
                                                 util::ms_to_s(options.duration_ms))
                                   : std::string("until Ctrl-C"));
    for (const auto& f : followed)
      fmt::print(stderr, "latency-doctor: also tracing pid {} ({}): {}\n", f.pid, f.comm, f.why);
  }

  Progress progress(options.quiet);
  uint64_t last_flush = start;
  const uint64_t interval_ms = options.read_interval_ms;
  while (true) {
    // Wake every read interval (flush, progress), or when the duration ends; the ring buffer
    // wakes us when data piles up, a target's exit (its pidfd) and SIGINT at once.
    int timeout_ms = static_cast<int>(interval_ms);
    if (options.duration_ms) {
      uint64_t elapsed_ms = (host::monotonic_now_ns() - start) / util::kNsPerMs;
      uint64_t left_ms = options.duration_ms > elapsed_ms ? options.duration_ms - elapsed_ms : 0;
      timeout_ms = static_cast<int>(std::min<uint64_t>(left_ms, interval_ms));
    }
    session.poll(g_stop ? 0 : timeout_ms);  // a stop asked from on_wake (a key) ends at once
    uint64_t now = host::monotonic_now_ns();
    if (g_stop) {
      result.stop_reason = trace::StopReason::kSignal;
      break;
    }
    if (options.duration_ms && now - start >= options.duration_ms * util::kNsPerMs) {
      result.stop_reason = trace::StopReason::kDuration;
      break;
    }
    if (!options.keep_running) {
      bool all_exited = true;
      for (const auto& w : watches) all_exited = all_exited && w.exited();
      if (all_exited) {
        result.stop_reason = trace::StopReason::kTargetExit;
        break;
      }
    }
    if (options.on_wake) options.on_wake(session, now);
    if (attach_caps_kept && !options.children && !options.keep_running && !session.attaches_later()) {
      if (auto note = drop_capabilities(false); !note.empty()) result.warnings.push_back(note);
      attach_caps_kept = false;
    }
    if (writer && write_error.empty() && now - last_flush >= interval_ms * util::kNsPerMs) {
      try {
        writer->flush();
      } catch (const std::exception& e) {
        write_error = e.what();
      }
      last_flush = now;
    }
    progress.tick(now, start, options.duration_ms, status ? status() : "");
  }
  const OwnUsage usage_stopped = own_usage();
  const uint64_t stopped_ns = host::monotonic_now_ns();
  // Take what the kernel still holds before reading the counters: nothing is left behind.
  session.finish();
  // Nothing more reaches the sinks after this point (they may go out of scope first).
  session.stop_delivery();
  const uint64_t end = host::monotonic_now_ns();
  result.trailer.present = true;
  result.trailer.end_mono_ns = end;
  result.trailer.stop_reason = result.stop_reason;
  result.trailer.attach_ms = attach_ms;
  result.trailer.probes = session.status();
  result.trailer.agent =
      agent_cost(attach_ms, usage_before_attach, usage_attached, attached_ns, usage_stopped, stopped_ns, own_usage());
  if (writer && write_error.empty()) {
    try {
      writer->finish(trace::to_json(result.trailer));
    } catch (const std::exception& e) {
      write_error = e.what();
    }
  }
  if (!write_error.empty()) result.warnings.push_back(fmt::format("the trace file is incomplete: {}", write_error));
  if (result.stop_reason == trace::StopReason::kTargetExit)
    result.warnings.push_back("the target exited; the report covers what was recorded until then");
  result.session = std::move(session_owner);
  return result;
}

}  // namespace ld::probes
