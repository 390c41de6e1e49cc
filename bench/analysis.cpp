// ld-bench-analysis: how fast `latency-doctor report FILE` analyses a recorded trace .
//
// It runs the code path `report` runs (agent/cli/report.cpp): ld::trace::read_trace feeding
// ld::analysis::EventAnalyzer::on_record, then finish() (socket timeline, outliers, attribution
// of every outlier and every typical gap). Rules and rendering are left out: they work on the
// finished report, whose size does not grow with the trace.
//
//   ld-bench-analysis generate OUT.ldtrace [--records N] [--mix REAL.ldtrace] [--seed S]
//                                          [--threads T] [--fault-every K]
//       Writes a synthetic trace with the real TraceWriter: a streaming server answering
//       requests on T keep-alive connections, one worker thread each, every K-th request with
//       a 300 ms disk stall (a logger's fsync the worker waits for). Evidence records come in
//       the proportions REAL has per token send (its type mix, preempted share, syscalls,
//       kernel stacks); without --mix, a built-in mix.
//   ld-bench-analysis measure TRACE... [--repeat R] [--cpu C]
//       Prints a markdown table: a read-only pass (read + decompress + deliver) and the full
//       analysis, CPU and wall seconds, events/s, peak RSS. Every run is a fresh child process
//       pinned to CPU C (default: the last one), so the numbers are one core's and one run's
//       peak memory cannot hide another's.
//   ld-bench-analysis child read|full TRACE CPU
//       Internal: one measurement in this process; prints one JSON line.
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/event_analyzer.hpp"
#include "events.h"
#include "trace/trace_file.hpp"

extern char** environ;

namespace {

using nlohmann::json;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kUs = 1'000;

// ================================================================ the mix of a real trace

// What a synthetic trace copies from a real one, all relative to token sends so that it scales.
struct Mix {
  std::string source = "built-in";
  std::array<double, LD_EV_TYPE_MAX> per_token{};  // evidence records of each type per token send
  // Sync calls (fsync family) per token send: in a real trace they come in bursts from whoever
  // writes the file, so the generator puts them into its disk stalls, not into every gap.
  double disk_syscalls_per_token = 0;
  double tokens_per_request = 100;
  double preempted_share = 0.5;                               // of ld_offcpu records
  double traced_waker_share = 0.3;                            // of blocked ld_offcpu: woken by a thread of the target
  double user_sample_share = 0.9;                             // of ld_cpu_sample records
  std::vector<uint32_t> blocked_syscalls = {202, 232, 1};     // ld_offcpu.syscall_nr, sampled
  std::vector<uint32_t> syscall_kinds = {LD_SYS_FUTEX_WAIT};  // ld_syscall.kind, sampled
  std::vector<std::vector<uint8_t>> kstacks;                  // ld_kstack records copied verbatim
  json host = json::object();

  Mix() {
    // Fallback only (run.sh always passes --mix): roughly the sample server's mix.
    per_token[LD_EV_OFFCPU] = 1.0;
    per_token[LD_EV_SCHED_AGG] = 0.02;
    per_token[LD_EV_CPU_SAMPLE] = 1.0;
    per_token[LD_EV_SYSCALL] = 0.3;
    per_token[LD_EV_MIGRATE] = 0.1;
  }
};

bool is_disk_kind(uint32_t kind) { return kind >= LD_SYS_FSYNC && kind <= LD_SYS_DIRTY_THROTTLE; }

bool is_token_send(const ld_sock_io& io) {
  return io.dir == LD_DIR_SEND && (io.cls == LD_PC_SSE_DATA || io.cls == LD_PC_HTTP_RESPONSE_SSE);
}

// Counts what the real trace holds; the structural records (socket IO, closes, exits) are made
// by the generator's request model instead.
class MixCounter {
 public:
  void on_record(const ld_hdr& rec) {
    if (rec.type < LD_EV_TYPE_MAX) ++by_type_[rec.type];
    switch (rec.type) {
      case LD_EV_SOCK_IO: {
        const auto& io = reinterpret_cast<const ld_sock_io&>(rec);
        if (is_token_send(io)) ++tokens_;
        if (io.dir == LD_DIR_RECV && io.cls == LD_PC_HTTP_REQUEST) ++requests_;
        break;
      }
      case LD_EV_OFFCPU: on_offcpu(reinterpret_cast<const ld_offcpu&>(rec)); break;
      case LD_EV_CPU_SAMPLE:
        if (reinterpret_cast<const ld_cpu_sample&>(rec).user_mode) ++user_samples_;
        break;
      case LD_EV_SYSCALL: {
        const uint32_t kind = reinterpret_cast<const ld_syscall&>(rec).kind;
        if (is_disk_kind(kind)) ++disk_syscalls_;
        else syscall_kinds_.push_back(kind);
        break;
      }
      case LD_EV_KSTACK: {
        const auto* p = reinterpret_cast<const uint8_t*>(&rec);
        mix_.kstacks.emplace_back(p, p + rec.size);
        break;
      }
      default: break;
    }
  }

  Mix finish(const std::string& path, const json& header) {
    if (tokens_ == 0) throw std::runtime_error(path + ": no token sends: cannot scale a mix from it");
    mix_.source = path;
    for (size_t t = LD_EV_OFFCPU; t < LD_EV_TYPE_MAX; ++t)
      mix_.per_token[t] = t == LD_EV_KSTACK ? 0 : static_cast<double>(by_type_[t]) / tokens_;
    mix_.per_token[LD_EV_SYSCALL] = static_cast<double>(syscall_kinds_.size()) / tokens_;
    mix_.disk_syscalls_per_token = static_cast<double>(disk_syscalls_) / tokens_;
    mix_.tokens_per_request = requests_ ? static_cast<double>(tokens_) / requests_ : 100;
    const uint64_t offcpu = by_type_[LD_EV_OFFCPU];
    if (offcpu) {
      mix_.preempted_share = static_cast<double>(preempted_) / offcpu;
      mix_.traced_waker_share = offcpu > preempted_ ? static_cast<double>(traced_wakers_) / (offcpu - preempted_) : 0;
    }
    if (by_type_[LD_EV_CPU_SAMPLE])
      mix_.user_sample_share = static_cast<double>(user_samples_) / by_type_[LD_EV_CPU_SAMPLE];
    if (!blocked_syscalls_.empty()) mix_.blocked_syscalls = blocked_syscalls_;
    if (!syscall_kinds_.empty()) mix_.syscall_kinds = syscall_kinds_;
    mix_.host = header.value("host", json::object());
    return mix_;
  }

  nlohmann::json summary() const {
    json types = json::object();
    for (size_t t = 0; t < LD_EV_TYPE_MAX; ++t)
      if (by_type_[t]) types[std::to_string(t)] = by_type_[t];
    return {{"token_sends", tokens_}, {"requests", requests_}, {"records_by_type", types}};
  }

 private:
  void on_offcpu(const ld_offcpu& o) {
    if (o.kind == LD_OFF_PREEMPTED) {
      ++preempted_;
      return;
    }
    blocked_syscalls_.push_back(o.syscall_nr);
    if (o.waker_tgid == o.hdr.tgid && o.waker_tid != o.hdr.tid) ++traced_wakers_;
  }

  Mix mix_;
  std::array<uint64_t, LD_EV_TYPE_MAX> by_type_{};
  uint64_t tokens_ = 0, requests_ = 0, preempted_ = 0, traced_wakers_ = 0, user_samples_ = 0;
  uint64_t disk_syscalls_ = 0;
  std::vector<uint32_t> blocked_syscalls_, syscall_kinds_;
};

Mix mix_from_trace(const std::string& path) {
  MixCounter counter;
  auto read = ld::trace::read_trace(path, [&](const ld_hdr& rec) { counter.on_record(rec); });
  Mix mix = counter.finish(path, read.header);
  fmt::print(stderr, "mix from {}: {}\n", path, counter.summary().dump());
  return mix;
}

// ================================================================ the synthetic trace

// splitmix64: fast, deterministic for a given seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  bool chance(double p) { return unit() < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  uint64_t s_;
};

struct GenOptions {
  std::string out;
  uint64_t records = 30'000'000;
  uint64_t seed = 1;
  uint32_t threads = 4;  // worker threads = keep-alive connections served at once
  // Every K-th request has one 300 ms disk stall (0 = none); 10 = the recording bench/analysis.sh
  // makes (--fault-every 1000 tokens, 100 tokens per request).
  uint32_t fault_every = 10;
  std::string mix_path;
};

// One keep-alive connection, served by one worker thread.
struct Conn {
  enum class Next { kRequest, kStatus, kToken, kDone };
  uint32_t tid = 0;
  uint64_t sock_id = 0;
  uint64_t next_ns = 0;
  uint64_t prev_ns = 0;  // the previous send, or the end of a stall: where the evidence
                         // of the window the next token closes starts
  Next next = Next::kRequest;
  uint32_t tokens_left = 0;
  uint32_t stall_at = 0;  // tokens_left value whose gap gets the disk stall (0 = none)
  uint32_t requests_on_conn = 0;
};

class Generator {
 public:
  Generator(const GenOptions& o, const Mix& mix, ld::trace::TraceWriter& w) : o_(o), mix_(mix), w_(w), rng_(o.seed) {
    for (const auto& k : mix_.kstacks) {
      const auto& ks = *reinterpret_cast<const ld_kstack*>(k.data());
      (ks.source == LD_PROBE_PERF ? perf_stacks_ : sched_stacks_).push_back(ks.stack_id);
    }
    for (uint32_t i = 0; i < o_.threads; ++i) {
      Conn c;
      c.tid = kTgid + 1 + i;
      c.sock_id = ++sock_ids_;
      c.next_ns = kStart + i * 300 * kUs;  // staggered, as clients connect one after another
      c.prev_ns = c.next_ns;
      conns_.push_back(c);
      agg_from_[c.tid] = kStart;
    }
    agg_from_[kLoggerTid] = kStart;
  }

  static constexpr uint32_t kTgid = 4242;
  static constexpr uint32_t kLoggerTid = kTgid + 100;
  static constexpr uint64_t kStart = 1000 * 1000 * kMs;  // 1000 s of monotonic time

  // Emits until `records` are written; returns the end of the trace (last event time).
  uint64_t run() {
    uint64_t now = kStart;
    while (written_ < o_.records) {
      Conn& c = *std::min_element(conns_.begin(), conns_.end(),
                                  [](const Conn& a, const Conn& b) { return a.next_ns < b.next_ns; });
      now = c.next_ns;
      step(c);
    }
    for (const auto& k : mix_.kstacks) write_kstack(k, now);
    if (mix_.kstacks.empty()) write_fake_kstacks(now);
    return now;
  }

  uint64_t written() const { return written_; }
  uint64_t requests() const { return requests_; }

 private:
  const GenOptions& o_;
  const Mix& mix_;
  ld::trace::TraceWriter& w_;
  Rng rng_;
  std::vector<Conn> conns_;
  std::array<double, LD_EV_TYPE_MAX> owed_{};  // fractional records carried to the next token
  double owed_disk_ = 0;                       // sync calls owed to the next disk stall
  std::map<uint32_t, uint64_t> agg_from_;      // tid -> start of its open sched_agg period
  std::vector<int64_t> perf_stacks_, sched_stacks_;
  uint64_t sock_ids_ = 0x5000;
  uint64_t written_ = 0, requests_ = 0;
  uint64_t net_counter_ = 0;

  template <class T>
  void put(T& rec) {
    rec.hdr.size = sizeof(T);
    w_.append(&rec, sizeof(T));
    ++written_;
  }

  static ld_hdr hdr(uint16_t type, uint32_t tid, uint64_t ts) {
    ld_hdr h{};
    h.type = type;
    h.cpu = tid % 2;
    h.tgid = kTgid;
    h.tid = tid;
    h.ts_ns = ts;
    return h;
  }

  void sock(const Conn& c, uint64_t ts, uint8_t dir, uint8_t cls, int64_t ret) {
    ld_sock_io io{};
    io.hdr = hdr(LD_EV_SOCK_IO, c.tid, ts);
    io.sock_id = c.sock_id;
    io.ret = ret;
    io.fd = 7;
    io.lport = 8000;
    io.rport = static_cast<uint16_t>(40000 + c.sock_id % 20000);
    io.family = 2;
    io.dir = dir;
    io.syscall = dir == LD_DIR_SEND ? LD_SC_WRITE : LD_SC_READ;
    io.cls = cls;
    io.sse_events = cls == LD_PC_SSE_DATA ? 1 : 0;
    put(io);
  }

  // The request model: request line, status line, tokens, [DONE] + chunked end; every 20
  // requests the client reconnects.
  void step(Conn& c) {
    const uint64_t t = c.next_ns;
    switch (c.next) {
      case Conn::Next::kRequest:
        sock(c, t, LD_DIR_RECV, LD_PC_HTTP_REQUEST, 150 + static_cast<int64_t>(rng_.below(200)));
        ++requests_;
        c.tokens_left = static_cast<uint32_t>(std::max(2.0, mix_.tokens_per_request));
        c.stall_at = o_.fault_every && requests_ % o_.fault_every == 0 ? 1 + c.tokens_left / 2 : 0;
        c.next = Conn::Next::kStatus;
        c.next_ns = t + 50 * kUs;
        break;
      case Conn::Next::kStatus:
        sock(c, t, LD_DIR_SEND, LD_PC_HTTP_RESPONSE, 120);
        c.next = Conn::Next::kToken;
        c.next_ns = t + 5 * kMs + rng_.below(500 * kUs);  // prefill
        break;
      case Conn::Next::kToken:
        evidence(c.tid, c.prev_ns, t);
        sock(c, t, LD_DIR_SEND, LD_PC_SSE_DATA, 90);
        --c.tokens_left;
        c.next_ns = t + 2 * kMs + rng_.below(200 * kUs);  // --token-ms 2, with jitter
        if (c.tokens_left == 0) c.next = Conn::Next::kDone;
        if (c.tokens_left == c.stall_at && c.stall_at) {
          const uint64_t resumed = disk_stall(c.tid, t);
          c.next_ns += resumed - t;
          c.prev_ns = resumed;  // the ordinary evidence goes after the stall, not over it
          return;
        }
        break;
      case Conn::Next::kDone:
        sock(c, t, LD_DIR_SEND, LD_PC_SSE_DONE, 14);
        sock(c, t + 10 * kUs, LD_DIR_SEND, LD_PC_CHUNK_END, 5);
        c.next = Conn::Next::kRequest;
        c.next_ns = t + 300 * kUs;
        if (++c.requests_on_conn == 20) reconnect(c, t + 20 * kUs);
        break;
    }
    c.prev_ns = t;
  }

  void reconnect(Conn& c, uint64_t ts) {
    ld_sock_close cl{};
    cl.hdr = hdr(LD_EV_SOCK_CLOSE, c.tid, ts);
    cl.sock_id = c.sock_id;
    cl.fd = 7;
    put(cl);
    c.sock_id = ++sock_ids_;
    c.requests_on_conn = 0;
  }

  // The worker waits on a futex for the logger, which is in a 300 ms fsync; returns when the
  // worker runs again. Attribution follows the waker to the logger's fsync: disk_io.
  uint64_t disk_stall(uint32_t tid, uint64_t from) {
    const uint64_t off = from + 200 * kUs, wake = off + 300 * kMs, on = wake + 30 * kUs;
    // The logger's sync calls back to back over the stall (at least one): the owed burst.
    const uint64_t calls = std::max<uint64_t>(1, static_cast<uint64_t>(owed_disk_));
    owed_disk_ = std::max(0.0, owed_disk_ - static_cast<double>(calls));
    const uint64_t first = off + 50 * kUs, last = wake - 10 * kUs, each = (last - first) / calls;
    for (uint64_t i = 0; i < calls; ++i) fdatasync(first + i * each, first + (i + 1) * each);
    offcpu_blocked(kLoggerTid, first + 5 * kUs, last - 5 * kUs, 0, 75);  // in fdatasync
    offcpu_blocked(tid, off, wake, kLoggerTid, 202);                     // futex, woken by the logger
    return on;
  }

  void fdatasync(uint64_t start, uint64_t end) {
    static constexpr char kPath[] = "/var/log/app/requests.log";  // 25 bytes, padded to 32
    struct {
      ld_syscall s;
      char path[32];
    } rec{};
    rec.s.hdr = hdr(LD_EV_SYSCALL, kLoggerTid, end);
    rec.s.hdr.size = sizeof rec;
    rec.s.start_ns = start;
    rec.s.dur_ns = end - start;
    rec.s.arg0 = 3;
    rec.s.kind = LD_SYS_FDATASYNC;
    rec.s.path_len = sizeof kPath - 1;
    std::memcpy(rec.path, kPath, rec.s.path_len);
    w_.append(&rec, sizeof rec);
    ++written_;
  }

  void offcpu_blocked(uint32_t tid, uint64_t off, uint64_t wake, uint32_t waker, uint32_t nr) {
    ld_offcpu o{};
    o.hdr = hdr(LD_EV_OFFCPU, tid, wake + 20 * kUs);
    o.off_ns = off;
    o.wake_ns = wake;
    o.on_ns = o.hdr.ts_ns;
    o.kind = LD_OFF_BLOCKED;
    o.prev_state = 1;
    o.kstack_id = sched_stacks_.empty() ? -1 : rng_.pick(sched_stacks_);
    o.waker_tid = waker;
    o.waker_tgid = waker ? kTgid : 0;
    o.syscall_nr = nr;
    std::snprintf(o.waker_comm, LD_COMM_LEN, "%s", waker == kLoggerTid ? "logger" : waker ? "worker" : "swapper/0");
    std::snprintf(o.holder_comm, LD_COMM_LEN, "swapper/0");
    put(o);
  }

  // Evidence of thread `tid` in the window [a, b] that ends with a token send, in the mix's
  // proportions. Off-CPU intervals get disjoint slots so that a thread's intervals never overlap.
  void evidence(uint32_t tid, uint64_t a, uint64_t b) {
    for (size_t type = LD_EV_OFFCPU; type < LD_EV_TYPE_MAX; ++type) owed_[type] += mix_.per_token[type];
    owed_disk_ += mix_.disk_syscalls_per_token;
    const uint32_t n_off = take(LD_EV_OFFCPU);
    for (uint32_t i = 0; i < n_off; ++i) offcpu(tid, a + (b - a) * i / n_off, a + (b - a) * (i + 1) / n_off);
    // A thread's samples come in time order from the perf probe (one every ~2 ms it runs):
    // one per slot of the window, at a random point of its slot.
    const uint32_t n_samples = take(LD_EV_CPU_SAMPLE);
    for (uint32_t i = 0; i < n_samples; ++i)
      cpu_sample(tid, a + (b - a) * i / n_samples, a + (b - a) * (i + 1) / n_samples);
    for (uint32_t i = take(LD_EV_SYSCALL); i > 0; --i) syscall(tid, a, b);
    for (uint32_t i = take(LD_EV_SCHED_AGG); i > 0; --i) sched_agg(tid, b);
    for (uint32_t i = take(LD_EV_FAULTS); i > 0; --i) faults(tid, a, b);
    for (uint32_t i = take(LD_EV_MIGRATE); i > 0; --i) migrate(tid, b);
    for (uint32_t i = take(LD_EV_TCP_STATE); i > 0; --i) tcp_state(b);
    for (uint32_t i = take(LD_EV_NET_SAMPLE); i > 0; --i) net_sample(b);
    for (uint32_t i = take(LD_EV_CGROUP_SAMPLE); i > 0; --i) cgroup_sample(b);
    for (uint32_t i = take(LD_EV_CPU_FREQ); i > 0; --i) cpu_freq(b);
    for (uint32_t i = take(LD_EV_BLOCK_RQ); i > 0; --i) block_rq(tid, a, b);
    for (uint32_t i = take(LD_EV_RECLAIM); i > 0; --i) reclaim(tid, a, b);
    for (uint32_t i = take(LD_EV_TCP_RETRANS); i > 0; --i) retrans(b);
    // GIL records (a Python target) are not modelled: a C++ server has none.
  }

  uint32_t take(size_t type) {
    const auto n = static_cast<uint32_t>(owed_[type]);
    owed_[type] -= n;
    return n;
  }

  void offcpu(uint32_t tid, uint64_t lo, uint64_t hi) {
    ld_offcpu o{};
    const uint64_t span = hi - lo;
    o.off_ns = lo + span / 4;
    o.on_ns = lo + span * 3 / 4;
    o.hdr = hdr(LD_EV_OFFCPU, tid, o.on_ns);
    o.holder_tid = 900 + static_cast<uint32_t>(rng_.below(4));
    o.holder_tgid = 900;
    std::snprintf(o.holder_comm, LD_COMM_LEN, "kworker/%u:1", o.holder_tid % 2);
    o.syscall_nr = ~0u;
    o.kstack_id = -1;
    if (rng_.chance(mix_.preempted_share)) {
      o.kind = LD_OFF_PREEMPTED;
      o.waker_tid = o.holder_tid;
      o.waker_tgid = o.holder_tgid;
      std::memcpy(o.waker_comm, o.holder_comm, LD_COMM_LEN);
    } else {
      o.kind = LD_OFF_BLOCKED;
      o.prev_state = 1;
      o.wake_ns = o.on_ns - span / 10;
      o.syscall_nr = rng_.pick(mix_.blocked_syscalls);
      if (!sched_stacks_.empty()) o.kstack_id = rng_.pick(sched_stacks_);
      if (rng_.chance(mix_.traced_waker_share)) {
        o.waker_tid = kTgid + 1 + static_cast<uint32_t>(rng_.below(o_.threads));
        o.waker_tgid = kTgid;
        std::snprintf(o.waker_comm, LD_COMM_LEN, "worker");
      } else {
        std::snprintf(o.waker_comm, LD_COMM_LEN, "swapper/%u", tid % 2);
      }
    }
    put(o);
  }

  void cpu_sample(uint32_t tid, uint64_t a, uint64_t b) {
    ld_cpu_sample s{};
    s.hdr = hdr(LD_EV_CPU_SAMPLE, tid, a + rng_.below(b - a));
    s.user_mode = rng_.chance(mix_.user_sample_share) ? 1 : 0;
    s.kstack_id = s.user_mode || perf_stacks_.empty() ? -1 : rng_.pick(perf_stacks_);
    put(s);
  }

  void syscall(uint32_t tid, uint64_t a, uint64_t b) {
    ld_syscall s{};
    s.start_ns = a + rng_.below((b - a) / 2);
    s.dur_ns = rng_.below((b - a) / 4) + 1;
    s.hdr = hdr(LD_EV_SYSCALL, tid, s.start_ns + s.dur_ns);
    s.kind = rng_.pick(mix_.syscall_kinds);  // never a disk kind: those go to the stalls
    s.arg0 = s.kind == LD_SYS_FUTEX_WAIT ? 0x7f00'1000'0040 : 1 << 20;
    s.arg1 = s.kind == LD_SYS_FUTEX_WAIT ? 0x80 : 3;
    put(s);
  }

  void sched_agg(uint32_t tid, uint64_t b) {
    ld_sched_agg g{};
    g.hdr = hdr(LD_EV_SCHED_AGG, tid, b);
    g.period_start_ns = std::min(agg_from_[tid], b);
    g.blocked_ns = (b - g.period_start_ns) / 20;
    g.runnable_ns = (b - g.period_start_ns) / 50;
    g.blocked_count = 10 + static_cast<uint32_t>(rng_.below(30));
    g.runnable_count = static_cast<uint32_t>(rng_.below(10));
    agg_from_[tid] = b;
    put(g);
  }

  void faults(uint32_t tid, uint64_t a, uint64_t b) {
    ld_faults f{};
    f.first_ns = a + rng_.below((b - a) / 2);
    f.hdr = hdr(LD_EV_FAULTS, tid, f.first_ns + rng_.below((b - a) / 2));
    f.count = 1 + static_cast<uint32_t>(rng_.below(64));
    put(f);
  }

  void migrate(uint32_t tid, uint64_t b) {
    ld_migrate m{};
    m.hdr = hdr(LD_EV_MIGRATE, tid, b);
    m.orig_cpu = tid % 2;
    m.dest_cpu = 1 - tid % 2;
    put(m);
  }

  void tcp_state(uint64_t b) {
    ld_tcp_state t{};
    t.hdr = hdr(LD_EV_TCP_STATE, 0, b);
    t.sock_id = sock_ids_;
    t.lport = 8000;
    t.rport = 40000;
    t.oldstate = LD_TCP_SYN_RECV;
    t.newstate = LD_TCP_ESTABLISHED;
    t.family = 2;
    t.flags = LD_TCP_F_LISTEN_PORT;
    put(t);
  }

  void net_sample(uint64_t b) {
    ld_net_sample n{};
    n.hdr = hdr(LD_EV_NET_SAMPLE, 0, b);
    n.passive_opens = ++net_counter_;
    n.tcp_timewait = 3;
    put(n);
  }

  void cgroup_sample(uint64_t b) {
    ld_cgroup_sample g{};
    g.hdr = hdr(LD_EV_CGROUP_SAMPLE, 0, b);
    g.quota_us = ~0ULL;
    g.period_us = 100000;
    g.mem_usage_now = 300u << 20;
    g.mem_limit = ~0ULL;
    put(g);
  }

  void cpu_freq(uint64_t b) {
    ld_cpu_freq f{};
    f.hdr = hdr(LD_EV_CPU_FREQ, 0, b);
    f.cpu_id = static_cast<uint32_t>(rng_.below(2));
    f.khz = 2'400'000;
    f.max_khz = 2'400'000;
    f.sampled = 1;
    put(f);
  }

  void block_rq(uint32_t tid, uint64_t a, uint64_t b) {
    ld_block_rq r{};
    r.issue_ns = a + rng_.below((b - a) / 2);
    r.hdr = hdr(LD_EV_BLOCK_RQ, tid, r.issue_ns + rng_.below((b - a) / 2) + 1);
    r.sector = rng_.below(1ULL << 30);
    r.dev = 253u << 20;
    r.bytes = 4096u << rng_.below(6);
    r.rwbs = LD_RWBS_WRITE | (rng_.chance(0.1) ? LD_RWBS_SYNC : 0);
    put(r);
  }

  void reclaim(uint32_t tid, uint64_t a, uint64_t b) {
    ld_reclaim r{};
    r.start_ns = a + rng_.below((b - a) / 2);
    r.hdr = hdr(LD_EV_RECLAIM, tid, r.start_ns + rng_.below((b - a) / 10) + 1);
    r.nr_reclaimed = 32;
    put(r);
  }

  void retrans(uint64_t b) {
    ld_tcp_retrans r{};
    r.hdr = hdr(LD_EV_TCP_RETRANS, 0, b);
    r.sock_id = sock_ids_;
    r.lport = 8000;
    r.rport = 40000;
    r.state = LD_TCP_ESTABLISHED;
    put(r);
  }

  void write_kstack(const std::vector<uint8_t>& raw, uint64_t ts) {
    std::vector<uint64_t> aligned((raw.size() + 7) / 8);
    std::memcpy(aligned.data(), raw.data(), raw.size());
    reinterpret_cast<ld_hdr*>(aligned.data())->ts_ns = ts;
    w_.append(aligned.data(), raw.size());
    ++written_;
  }

  // Without a real trace: a few stacks so that kernel samples and blocks have something to read.
  void write_fake_kstacks(uint64_t ts) {
    static const char* kFrames[] = {"futex_wait_queue+0x60", "futex_wait+0x175", "do_futex+0x105",
                                    "__x64_sys_futex+0x7e", "do_syscall_64+0x5b"};
    constexpr uint32_t depth = sizeof kFrames / sizeof *kFrames;
    struct {
      ld_kstack k;
      char frames[depth][LD_SYM_LEN];
    } rec{};
    rec.k.hdr = hdr(LD_EV_KSTACK, 0, ts);
    rec.k.hdr.tgid = 0;
    rec.k.hdr.size = sizeof rec;
    rec.k.depth = depth;
    for (uint32_t i = 0; i < depth; ++i) std::snprintf(rec.frames[i], LD_SYM_LEN, "%s", kFrames[i]);
    for (uint32_t source : {LD_PROBE_SCHED, LD_PROBE_PERF}) {
      rec.k.source = source;
      rec.k.stack_id = 1;
      w_.append(&rec, sizeof rec);
      ++written_;
    }
  }
};

int generate(const GenOptions& o) {
  const Mix mix = o.mix_path.empty() ? Mix{} : mix_from_trace(o.mix_path);
  json header = {
      {"agent", {{"name", "ld-bench-analysis"}, {"version", LD_VERSION}}},
      {"clock",
       {{"realtime_minus_monotonic_ns", int64_t{1'700'000'000} * 1'000'000'000}, {"start_mono_ns", Generator::kStart}}},
      {"target",
       {{"pids", {Generator::kTgid}},
        {"comm", "synthetic"},
        {"exe", ""},
        {"start_mono_ns", Generator::kStart - 600'000 * kMs}}},
      {"host", mix.host},
      {"token_source", "sse"},
      {"synthetic",
       {{"records", o.records},
        {"seed", o.seed},
        {"threads", o.threads},
        {"fault_every", o.fault_every},
        {"mix", mix.source}}},
  };
  ld::trace::TraceWriter writer(o.out, header);
  Generator gen(o, mix, writer);
  const uint64_t end = gen.run();
  json probes = json::array();
  for (const char* name : {"sock", "sched", "perf", "memory", "disk", "futex", "tcp"})
    probes.push_back({{"name", name}, {"status", "attached"}, {"reason", ""}, {"events", 0}, {"lost", 0}});
  writer.finish({{"end_mono_ns", end + kMs}, {"stop_reason", "synthetic"}, {"probes", probes}});
  fmt::print(stderr, "wrote {}: {} records, {} requests, {:.0f} s of trace, {:.1f} MiB\n", o.out, gen.written(),
             gen.requests(), static_cast<double>(end - Generator::kStart) / 1e9,
             static_cast<double>(writer.bytes_written()) / (1 << 20));
  return 0;
}

// ================================================================ one measurement (child)

double clock_s(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Clocks {
  double wall = clock_s(CLOCK_MONOTONIC);
  double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID);
};

// Peak resident set of this process (VmHWM), in KiB: file pages it mapped count too.
uint64_t peak_rss_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    throw std::runtime_error(fmt::format("sched_setaffinity({}): {}", cpu, std::strerror(errno)));
}

// mode "read": read + decompress + deliver every record, nothing else.
// mode "full": what `report` does up to the finished report.
json measure_once(const std::string& mode, const std::string& path) {
  json out = {{"mode", mode}};
  const Clocks t0;
  if (mode == "read") {
    uint64_t sum = 0;  // touch every record so the pass cannot be skipped
    auto read = ld::trace::read_trace(path, [&](const ld_hdr& rec) { sum += rec.type; });
    const Clocks t1;
    out["records"] = read.records;
    out["cpu_read"] = t1.cpu - t0.cpu;
    out["wall_read"] = t1.wall - t0.wall;
    out["checksum"] = sum;
  } else {
    ld::analysis::EventAnalyzer analyzer;
    auto read = ld::trace::read_trace(path, [&](const ld_hdr& rec) { analyzer.on_record(rec, rec.size); });
    const Clocks t1;
    const std::string token_source = read.header.value("token_source", std::string("sse"));
    auto report = analyzer.finish(read.header, read.trailer, token_source, read.warnings);
    const Clocks t2;
    out["records"] = read.records;
    out["cpu_read"] = t1.cpu - t0.cpu;
    out["wall_read"] = t1.wall - t0.wall;
    out["cpu_finish"] = t2.cpu - t1.cpu;
    out["wall_finish"] = t2.wall - t1.wall;
    out["requests"] = report.requests;
    out["tokens"] = report.tokens;
    out["outliers"] = report.outliers.size();
    out["typical_windows"] = report.typical.windows;
    out["top_cause"] = report.outliers.empty() || report.outliers.front().causes.empty()
                           ? ""
                           : std::string(ld::model::cause_id(report.outliers.front().causes.front().cause));
  }
  out["peak_rss_kb"] = peak_rss_kb();
  return out;
}

int child(const std::string& mode, const std::string& path, int cpu) {
  pin_to_cpu(cpu);
  fmt::print("{}\n", measure_once(mode, path).dump());
  return 0;
}

// ================================================================ the table (parent)

json run_child(const std::string& mode, const std::string& path, int cpu) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  const std::string cpu_s = std::to_string(cpu);
  const char* argv[] = {"ld-bench-analysis", "child", mode.c_str(), path.c_str(), cpu_s.c_str(), nullptr};
  pid_t pid = 0;
  // exec, not just fork: a fresh address space, so VmHWM is this run's alone.
  int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) throw std::runtime_error(fmt::format("posix_spawn: {}", std::strerror(rc)));
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(fmt::format("measurement of {} ({}) failed", path, mode));
  return json::parse(text);
}

// The run with the median total CPU; peak RSS is the largest seen.
json median_run(std::vector<json> runs) {
  auto cpu = [](const json& r) { return r.value("cpu_read", 0.0) + r.value("cpu_finish", 0.0); };
  std::sort(runs.begin(), runs.end(), [&](const json& a, const json& b) { return cpu(a) < cpu(b); });
  json m = runs[runs.size() / 2];
  for (const json& r : runs)
    m["peak_rss_kb"] = std::max(m["peak_rss_kb"].get<uint64_t>(), r["peak_rss_kb"].get<uint64_t>());
  return m;
}

std::string mib(double bytes) {
  const double m = bytes / (1 << 20);
  return m < 10 ? fmt::format("{:.1f} MiB", m) : fmt::format("{:.0f} MiB", m);
}

std::string count(double n) { return n < 1e6 ? fmt::format("{:.1f}k", n / 1e3) : fmt::format("{:.1f}M", n / 1e6); }

std::string file_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int measure(const std::vector<std::string>& traces, int repeat, int cpu) {
  fmt::print(
      "Analysis of a recorded trace: `report`'s path (read_trace -> EventAnalyzer::on_record -> "
      "finish()), one core (CPU {}), median of {} runs, each a fresh process.\n\n",
      cpu, repeat);
  fmt::print(
      "| trace | records | file | read only: CPU s | read only: records/s | read only: peak RSS | "
      "full: read + on_record CPU s | full: finish() CPU s | full: CPU s (wall s) | **full: events/s** "
      "(records / CPU s) | full: peak RSS | requests / outliers |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& path : traces) {
    std::vector<json> reads, fulls;
    for (int i = 0; i < repeat; ++i) {
      reads.push_back(run_child("read", path, cpu));
      fulls.push_back(run_child("full", path, cpu));
    }
    const json r = median_run(reads), f = median_run(fulls);
    struct stat st {};
    stat(path.c_str(), &st);
    const double records = f["records"].get<double>();
    const double cpu_full = f["cpu_read"].get<double>() + f["cpu_finish"].get<double>();
    const double wall_full = f["wall_read"].get<double>() + f["wall_finish"].get<double>();
    const double cpu_read_only = r["cpu_read"].get<double>();
    fmt::print("| {} | {} | {} | {:.3f} | {}/s | {} | {:.3f} | {:.3f} | {:.3f} ({:.3f}) | **{}/s** | {} | {} / {} |\n",
               file_name(path), count(records), mib(static_cast<double>(st.st_size)), cpu_read_only,
               count(records / cpu_read_only), mib(r["peak_rss_kb"].get<double>() * 1024), f["cpu_read"].get<double>(),
               f["cpu_finish"].get<double>(), cpu_full, wall_full, count(records / cpu_full),
               mib(f["peak_rss_kb"].get<double>() * 1024), f["requests"].get<uint64_t>(),
               f["outliers"].get<uint64_t>());
  }
  return 0;
}

// ================================================================ arguments

[[noreturn]] void usage() {
  std::fputs(
      "usage: ld-bench-analysis generate OUT.ldtrace [--records N] [--mix REAL.ldtrace] [--seed S]\n"
      "                          [--threads T] [--fault-every K]\n"
      "       ld-bench-analysis measure TRACE... [--repeat R] [--cpu C]\n",
      stderr);
  std::exit(2);
}

uint64_t number(const std::vector<std::string>& args, size_t& i) {
  if (i + 1 >= args.size()) usage();
  return std::stoull(args[++i]);
}

int main_of(const std::vector<std::string>& args) {
  if (args.empty()) usage();
  const std::string& cmd = args[0];
  if (cmd == "child" && args.size() == 4) return child(args[1], args[2], std::stoi(args[3]));
  if (cmd == "generate") {
    GenOptions o;
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--records") o.records = number(args, i);
      else if (args[i] == "--seed") o.seed = number(args, i);
      else if (args[i] == "--threads") o.threads = static_cast<uint32_t>(std::max<uint64_t>(1, number(args, i)));
      else if (args[i] == "--fault-every") o.fault_every = static_cast<uint32_t>(number(args, i));
      else if (args[i] == "--mix" && i + 1 < args.size()) o.mix_path = args[++i];
      else if (o.out.empty() && args[i][0] != '-') o.out = args[i];
      else usage();
    }
    if (o.out.empty()) usage();
    return generate(o);
  }
  if (cmd == "measure") {
    std::vector<std::string> traces;
    int repeat = 3;
    int cpu = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--repeat") repeat = static_cast<int>(std::max<uint64_t>(1, number(args, i)));
      else if (args[i] == "--cpu") cpu = static_cast<int>(number(args, i));
      else if (args[i][0] != '-') traces.push_back(args[i]);
      else usage();
    }
    if (traces.empty()) usage();
    return measure(traces, repeat, cpu);
  }
  usage();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return main_of(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    fmt::print(stderr, "ld-bench-analysis: {}\n", e.what());
    return 1;
  }
}
