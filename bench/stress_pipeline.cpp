// ld-bench-stress-pipeline: the agent's event pipeline (BPF ring buffer -> poll loop -> record
// dispatch -> TraceWriter -> .ldtrace) at a fixed offered rate, independent of what producing
// the events costs a workload. The event-pipeline goal of docs/performance.md.
//
//   ld-bench-stress-pipeline RATE SECONDS [--ringbuf-size 16M] [--batch 256] [--mix real|sock]
//                            [-o TRACE] [--verify] [--bpf-stats] [--quiet]
//
// The recording is the real one: probes::record() -- the function behind `latency-doctor
// record` -- with its ProbeSession (shared maps, ring buffer, poll loop, dispatch) and
// TraceWriter. The one probe is bench-only (bpf/bench_stress.bpf.c, handed in through
// RecordOptions::extra_probes, never in the registry): a raw_tp program that a producer thread
// here runs with BPF_PROG_TEST_RUN, each run emitting a batch of records through the probes'
// own submit helper (ld_reserve/ld_commit: BPF_RB_NO_WAKEUP but at 1/16-of-the-ring marks,
// kernel-side submitted/dropped counters). The producer is paced to RATE records/s for SECONDS.
//
// record() needs a target process: a child that only waits. The producer kills it when done,
// so the recording stops on target-exit, drains the ring buffer and writes the trailer, as a
// recording of a real workload does. SIGINT/SIGTERM stop the producer early, the same way:
// every record it submitted is still drained and counted (nothing stays loaded either way).
//
// Prints "key value" lines on stdout: asked, achieved (records/s submitted), submitted,
// written (records that reached the ring buffer: submitted - dropped), dropped (ring buffer
// full), delivered (records the recorder handed to the trace writer and the live sink),
// trace_bytes, agent_cpu_pct (every thread but the producer's: poll loop, dispatch, trace
// compression and writes; % of one core over the producing time), poll_thread_cpu_pct (the
// recording thread alone), producer_cpu_pct (the producer thread: test runs, pacing, and the
// BPF program, which on a real host runs in the target's threads), bpf_ns_per_record (with
// --bpf-stats: the program's run time per record), machine_cpu_pct (every CPU's busy time over
// the producing time, % of one core: what is left after ours is other processes' load), ...
// With --verify, the trace is read back and `read_back` records are counted.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench_stress.skel.h"
#include "events.h"
#include "probes/libbpf_util.hpp"
#include "probes/probe.hpp"
#include "probes/recorder.hpp"
#include "trace/trace_file.hpp"

namespace {

using ld::probes::Probe;
using ld::probes::ProbeContext;

uint64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ULL + uint64_t(ts.tv_nsec);
}
uint64_t now_ns() { return clock_ns(CLOCK_MONOTONIC); }

// Busy and total jiffies of the whole machine (/proc/stat "cpu" line), for how loaded the
// machine was while we measured (other work on the same CPUs changes what a rate costs).
struct MachineTicks {
  uint64_t busy = 0, total = 0;
};
MachineTicks machine_ticks() {
  MachineTicks t;
  FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return t;
  unsigned long long v[10] = {};
  if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                  &v[6], &v[7], &v[8], &v[9]) >= 8) {
    for (int i = 0; i < 8; ++i) t.total += v[i];  // guest time is already in user
    t.busy = t.total - v[3] - v[4];               // all but idle and iowait
  }
  std::fclose(f);
  return t;
}

uint64_t process_cpu_ns() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) { return uint64_t(tv.tv_sec) * 1000000000ULL + uint64_t(tv.tv_usec) * 1000; };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

// Record types per cycle. "real": the proportions of a default-probes recording of
// ld-sample-server (--token-ms 2 --tokens 100) under `bench -c 2`, 6.7k records: cpu_sample
// 38%, sock_io 37%, offcpu 22%, sched_agg 1.3%, the rest < 1% each (kernel stacks, made in
// user space at the end, are left out) -> 12 : 12 : 7 : 1 of 32, interleaved, 68.8 bytes a
// record on average (the recording: 72). "sock": the sock probe's records only, as
// bench/stress_sock.cpp produces them.
std::vector<uint16_t> mix_named(const std::string& name) {
  if (name == "sock") return {LD_EV_SOCK_IO};
  if (name != "real") return {};
  std::vector<uint16_t> mix;
  for (char c : std::string("SCOSCOSCSCOSCASCOSCSCOSCOSCSCOSC"))
    mix.push_back(c == 'S' ? LD_EV_SOCK_IO : c == 'C' ? LD_EV_CPU_SAMPLE : c == 'O' ? LD_EV_OFFCPU : LD_EV_SCHED_AGG);
  return mix;
}

size_t record_size(uint16_t type) {
  switch (type) {
    case LD_EV_SOCK_IO: return sizeof(ld_sock_io);
    case LD_EV_OFFCPU: return sizeof(ld_offcpu);
    case LD_EV_CPU_SAMPLE: return sizeof(ld_cpu_sample);
    case LD_EV_SCHED_AGG: return sizeof(ld_sched_agg);
    default: return 0;
  }
}

// What the probe and the producer thread share.
struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  int prog_fd = -1;    // set by the probe once loaded
  bool abort = false;  // the recording failed or ended before the producer was told to start
};

class StressProbe : public Probe {
 public:
  StressProbe(Shared& shared, std::vector<uint16_t> mix) : shared_(shared), mix_(std::move(mix)) {}
  void start(ProbeContext& ctx) override {
    skel_.reset(bench_stress_bpf__open());
    if (!skel_) ld::probes::throw_libbpf_error("bench-stress", "opening", errno);
    ld::probes::use_shared_maps(skel_->obj, ctx.shared);
    for (size_t i = 0; i < mix_.size(); ++i) skel_->rodata->ld_bench_mix[i] = mix_[i];
    skel_->rodata->ld_bench_mix_len = static_cast<uint32_t>(mix_.size());
    if (int err = bench_stress_bpf__load(skel_.get())) ld::probes::throw_libbpf_error("bench-stress", "loading", err);
    // Nothing to attach: the producer runs the program with BPF_PROG_TEST_RUN.
    std::lock_guard lock(shared_.mu);
    shared_.prog_fd = bpf_program__fd(skel_->progs.ld_bench_stress);
    shared_.cv.notify_all();
  }
  std::string detail() const override { return "bench only: records emitted by BPF_PROG_TEST_RUN of bench_stress"; }

 private:
  Shared& shared_;
  std::vector<uint16_t> mix_;
  ld::probes::SkelPtr<bench_stress_bpf, bench_stress_bpf__destroy> skel_;
};

volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

struct ProducerResult {
  uint64_t asked_records = 0;  // records the runs were asked to emit
  uint64_t runs = 0;
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t cpu_ns = 0;
  uint64_t bpf_run_ns = 0;  // the program's own run time (--bpf-stats), else 0
  MachineTicks machine_start, machine_end;
  std::string error;
};

// Paced: one run of `batch` records whenever that many are due by the rate, else sleep until
// they are. Whole batches only: every run is a bpf(2) call and every sleep a timer (a VM exit
// here), so catching up in small runs would make the producer, not the pipeline, the cost.
// Falls behind (and says so in `achieved`) when it cannot keep the pace.
void produce(Shared& shared, double rate, double seconds, uint32_t batch, pid_t target, ProducerResult& out) {
  int fd;
  {
    std::unique_lock lock(shared.mu);
    shared.cv.wait(lock, [&] { return shared.prog_fd >= 0 || shared.abort; });
    fd = shared.abort ? -1 : shared.prog_fd;
  }
  const uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  out.machine_start = machine_ticks();
  out.start_ns = now_ns();
  const uint64_t end = out.start_ns + static_cast<uint64_t>(seconds * 1e9);
  uint64_t sent = 0;
  while (fd >= 0 && !g_stop) {
    uint64_t now = now_ns();
    if (now >= end) break;
    uint64_t due = static_cast<uint64_t>(static_cast<double>(now - out.start_ns) / 1e9 * rate);
    if (sent + batch > due) {
      const double wait_s = static_cast<double>(sent + batch - due) / rate;
      const auto wait_ns = static_cast<long>(std::clamp(wait_s, 20e-6, 10e-3) * 1e9);
      timespec pause{0, wait_ns};
      nanosleep(&pause, nullptr);
      continue;
    }
    const uint64_t n = batch;
    uint64_t args[2] = {n, sent};
    LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = args, .ctx_size_in = sizeof(args));
    if (int err = bpf_prog_test_run_opts(fd, &opts)) {
      out.error = fmt::format("BPF_PROG_TEST_RUN failed: {}", std::strerror(-err));
      break;
    }
    sent += n;
    ++out.runs;
  }
  out.end_ns = now_ns();
  out.machine_end = machine_ticks();
  out.asked_records = sent;
  out.cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0) out.bpf_run_ns = info.run_time_ns;
  // The recording stops on target-exit: it drains the ring buffer and writes the trailer.
  kill(target, SIGKILL);
}

// A process for record() to target: it only waits, and dies with us.
pid_t spawn_target() {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    prctl(PR_SET_NAME, "ld-stress-target");
    for (;;) pause();
  }
  return pid;
}

uint64_t parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit = end ? end : "";
  if (unit == "K" || unit == "k") v *= 1024;
  else if (unit == "M" || unit == "m") v *= 1024 * 1024;
  else if (unit == "G" || unit == "g") v *= 1024.0 * 1024 * 1024;
  else if (!unit.empty()) return 0;
  return static_cast<uint64_t>(v);
}

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s RATE SECONDS [--ringbuf-size 16M] [--batch 256] [--mix real|sock] "
               "[-o TRACE] [--verify] [--bpf-stats] [--quiet]\n",
               argv0);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) usage(argv[0]);
  const double rate = std::atof(argv[1]);
  const double seconds = std::atof(argv[2]);
  uint64_t ringbuf = 16u << 20;  // RecordOptions' (and the CLI's) default
  uint32_t batch = 256;
  std::string mix_name = "real";
  std::string trace_path;
  bool verify = false, quiet = false, bpf_stats = false;
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    if (a == "--ringbuf-size") ringbuf = parse_size(value());
    else if (a == "--batch") batch = static_cast<uint32_t>(std::atoi(value().c_str()));
    else if (a == "--mix") mix_name = value();
    else if (a == "-o") trace_path = value();
    else if (a == "--verify") verify = true;
    else if (a == "--bpf-stats") bpf_stats = true;
    else if (a == "--quiet") quiet = true;
    else usage(argv[0]);
  }
  const auto mix = mix_named(mix_name);
  if (rate <= 0 || seconds <= 0 || batch == 0 || batch > (1u << 20) || mix.empty() || ringbuf < 4096 ||
      ringbuf > (1ULL << 30) || (ringbuf & (ringbuf - 1)))
    usage(argv[0]);
  const bool keep_trace = !trace_path.empty();
  if (!keep_trace) trace_path = fmt::format("/tmp/ld-stress-pipeline-{}.ldtrace", getpid());

  // BPF run-time statistics for as long as this fd is open (no global sysctl left behind).
  const int stats_fd = bpf_stats ? bpf_enable_stats(BPF_STATS_RUN_TIME) : -1;
  if (bpf_stats && stats_fd < 0)
    std::fprintf(stderr, "ld-bench-stress-pipeline: no BPF stats: %s\n", std::strerror(errno));

  const pid_t target = spawn_target();
  if (target < 0) {
    std::perror("fork");
    return 2;
  }
  // Not record()'s own handlers: those would end the recording before the producer stops.
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  Shared shared;
  ProducerResult produced;
  std::thread producer(produce, std::ref(shared), rate, seconds, batch, target, std::ref(produced));

  ld::probes::RecordOptions options;
  options.pids = {target};
  options.trace_path = trace_path;
  options.ringbuf_bytes = static_cast<uint32_t>(ringbuf);
  options.probes = {"bench-stress"};
  options.quiet = true;
  options.duration_ms = static_cast<uint64_t>(seconds * 1000) + 60000;  // a safety net only
  options.extra_probes.push_back({"bench-stress", LD_PROBE_BENCH, "pipeline benchmark producer", false,
                                  [&shared, &mix] { return std::make_unique<StressProbe>(shared, mix); }});

  uint64_t delivered = 0;
  ld::probes::RecordResult result;
  std::string error;
  const uint64_t process_cpu0 = process_cpu_ns();
  const uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  const uint64_t wall0 = now_ns();
  try {
    result = ld::probes::record(options, [&](const ld_hdr&, size_t) { ++delivered; });
  } catch (const std::exception& e) {
    error = e.what();
  }
  const uint64_t poll_cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  const uint64_t agent_wall_ns = now_ns() - wall0;
  {
    std::lock_guard lock(shared.mu);
    shared.abort = true;  // a producer still waiting for the program gives up
    shared.cv.notify_all();
  }
  producer.join();
  // The agent: the recording thread plus the trace writer's thread (everything but the producer).
  const uint64_t agent_cpu_ns = process_cpu_ns() - process_cpu0 - produced.cpu_ns;
  kill(target, SIGKILL);
  waitpid(target, nullptr, 0);
  result.session.reset();  // detach and unload before reading the trace back
  if (!error.empty()) {
    std::fprintf(stderr, "ld-bench-stress-pipeline: %s\n", error.c_str());
    if (!keep_trace) unlink(trace_path.c_str());
    return 2;
  }
  if (!produced.error.empty()) std::fprintf(stderr, "ld-bench-stress-pipeline: %s\n", produced.error.c_str());
  for (const auto& w : result.warnings)
    if (w.find("target exited") == std::string::npos)
      std::fprintf(stderr, "ld-bench-stress-pipeline: warning: %s\n", w.c_str());

  uint64_t written = 0, dropped = 0;
  for (const auto& p : result.trailer.probes)
    if (p.name == "bench-stress") {
      written = p.events;
      dropped = p.lost;
    }
  const uint64_t submitted = written + dropped;
  struct stat st {};
  stat(trace_path.c_str(), &st);
  const double produce_s = static_cast<double>(produced.end_ns - produced.start_ns) / 1e9;

  uint64_t read_back = 0;
  if (verify) {
    try {
      auto summary = ld::trace::read_trace(trace_path, [&](const ld_hdr&) { ++read_back; });
      for (const auto& w : summary.warnings) std::fprintf(stderr, "read back: %s\n", w.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "read back failed: %s\n", e.what());
    }
  }
  if (!keep_trace) unlink(trace_path.c_str());

  double mix_bytes = 0;
  for (uint16_t t : mix) mix_bytes += static_cast<double>(record_size(t));
  mix_bytes /= static_cast<double>(mix.size());

  std::printf("asked %.0f\n", rate);
  std::printf("achieved %.0f\n", produce_s > 0 ? static_cast<double>(submitted) / produce_s : 0.0);
  std::printf("seconds %.3f\n", produce_s);
  std::printf("producer_asked %llu\n", static_cast<unsigned long long>(produced.asked_records));
  std::printf("submitted %llu\n", static_cast<unsigned long long>(submitted));
  std::printf("written %llu\n", static_cast<unsigned long long>(written));
  std::printf("dropped %llu\n", static_cast<unsigned long long>(dropped));
  std::printf("delivered %llu\n", static_cast<unsigned long long>(delivered));
  if (verify) std::printf("read_back %llu\n", static_cast<unsigned long long>(read_back));
  std::printf("trace_bytes %lld\n", static_cast<long long>(st.st_size));
  std::printf("record_bytes_avg %.1f\n", mix_bytes);
  auto pct = [&](uint64_t ns) { return produce_s > 0 ? ns / 1e9 / produce_s * 100 : 0.0; };
  std::printf("agent_cpu_pct %.1f\n", pct(agent_cpu_ns));
  std::printf("poll_thread_cpu_pct %.1f\n", pct(poll_cpu_ns));
  std::printf("agent_wall_s %.3f\n", agent_wall_ns / 1e9);
  std::printf("producer_cpu_pct %.1f\n", pct(produced.cpu_ns));
  // The machine's busy CPU (all CPUs, % of one core: up to 100 x CPUs); minus agent_cpu_pct and
  // producer_cpu_pct, what other processes used meanwhile.
  const double ticks = static_cast<double>(produced.machine_end.total - produced.machine_start.total);
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ticks > 0)
    std::printf("machine_cpu_pct %.1f\n",
                (produced.machine_end.busy - produced.machine_start.busy) / ticks * 100.0 * ncpu);
  if (produced.bpf_run_ns && submitted)
    std::printf("bpf_ns_per_record %.0f\n", static_cast<double>(produced.bpf_run_ns) / submitted);
  if (g_stop) std::printf("interrupted 1\n");
  std::printf("ringbuf_bytes %llu\n", static_cast<unsigned long long>(ringbuf));
  std::printf("batch %u\n", batch);
  if (!quiet)
    std::fprintf(stderr,
                 "asked %.0f/s: achieved %.0f/s for %.1f s; submitted %llu, written %llu, dropped "
                 "%llu; trace %.1f MiB; agent CPU %.1f%% of a core\n",
                 rate, produce_s > 0 ? submitted / produce_s : 0.0, produce_s,
                 static_cast<unsigned long long>(submitted), static_cast<unsigned long long>(written),
                 static_cast<unsigned long long>(dropped), st.st_size / 1048576.0, pct(agent_cpu_ns));
  // Exit 3: the counts disagree (a record neither written nor counted as dropped, or one the
  // kernel wrote that never reached the trace writer).
  const bool consistent =
      submitted == produced.asked_records && delivered == written && (!verify || read_back == written);
  return produced.error.empty() && consistent ? 0 : 3;
}
