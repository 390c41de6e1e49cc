#include "serve/service.hpp"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "events.h"
#include "host/host_facts.hpp"
#include "rules/engine.hpp"
#include "util/files.hpp"
#include "util/time.hpp"

namespace ld::serve {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

// CPU of the whole agent (all threads), seconds; resident memory now, bytes.
double own_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         util::us_to_s(static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec));
}

uint64_t own_rss_bytes() {
  std::string statm = util::read_file("/proc/self/statm");
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(statm.c_str(), "%llu %llu", &size, &resident) != 2) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// All capability sets of the calling thread emptied (capset(2) acts on one thread).
void drop_thread_capabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  syscall(SYS_capset, &header, data);
}

std::string utc_stamp(uint64_t unix_ns) {
  time_t t = static_cast<time_t>(unix_ns / util::kNsPerSec);
  tm parts{};
  gmtime_r(&t, &parts);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &parts);
  return buf;
}

std::string safe_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  return s.substr(0, 64);
}

}  // namespace

Service::Service(ServeOptions options) : options_(std::move(options)), buffer_(options_.window_memory) {
  if (options_.window_ms < 1000) throw std::invalid_argument("--window: at least 1s");
  if (options_.lookback_ms < options_.window_ms) throw std::invalid_argument("--lookback: at least one --window");
  start_unix_ns_ = host::realtime_now_ns();
  if (!options_.discovery.empty()) discovery_.emplace(options_.discovery);
  rules_ = std::make_shared<const rules::RuleSet>(rules::load_rules(options_.rules_paths));
  flight_ = std::make_unique<FlightRecorder>(options_.flight);
  fs::create_directories(captures_dir());
  chmod(captures_dir().c_str(), 0700);
  if (!options_.otlp_endpoint.empty()) otlp_ = std::make_unique<exporter::OtlpClient>(options_.otlp_endpoint);
  resource_ = {{"service.name", "latency-doctor"}, {"service.version", LD_VERSION}, {"host.name", hostname()}};
  metrics_.set_targets(0);
  update_agent_metrics();
  // The threads that read what others send (the scrape endpoint's, the dump socket's) and the
  // analysis thread start from a thread without capabilities, which they inherit:
  // capabilities are per thread, and only the recording thread needs (and keeps) the ones to
  // attach probes to new targets. They keep uid 0, so the 0700 flight directory is theirs.
  std::exception_ptr failed;
  std::thread launcher([&] {
    try {
      drop_thread_capabilities();
      if (!options_.metrics_addr.empty()) metrics_.serve_http(options_.metrics_addr);
      dump_server_ =
          std::make_unique<DumpServer>(options_.socket_path, [this](uint64_t since_ms) { return dump(since_ms); });
      thread_ = std::thread([this] { worker(); });
    } catch (...) {
      failed = std::current_exception();
    }
  });
  launcher.join();
  if (failed) std::rethrow_exception(failed);
}

Service::~Service() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  dump_server_.reset();
}

void Service::log(const std::string& line) const {
  if (!options_.quiet) fmt::print(stderr, "latency-doctor serve: {}\n", line);
}

std::string Service::captures_dir() const { return options_.flight.dir + "/captures"; }

std::string Service::describe_targets() const {
  std::vector<std::string> parts;
  for (const auto& [pid, p] : targets_) parts.push_back(fmt::format("{} ({})", pid, p.comm));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<int> Service::refresh_targets(const SessionHooks* hooks) {
  std::map<int, host::DiscoveredProcess> now;
  util::FileReader read = util::read_file;
  for (int pid : options_.pids)
    if (host::process_alive(pid, read)) {
      if (auto known = targets_.find(pid); known != targets_.end()) {
        now[pid] = known->second;
      } else if (auto info = host::read_process(pid)) {
        now[pid] = {pid, info->comm, info->exe};
      }
    }
  if (discovery_)
    for (auto& p : discovery_->scan(getpid())) now.emplace(p.pid, p);
  bool changed = false;
  for (const auto& [pid, p] : now)
    if (!targets_.count(pid)) {
      changed = true;
      if (hooks && hooks->add_target) hooks->add_target(pid);
      metrics_.target_discovered();
      log(fmt::format("target pid {} ({}, {}) {}", pid, p.comm, p.exe, hooks ? "found: tracing it" : "found"));
    }
  for (const auto& [pid, p] : targets_)
    if (!now.count(pid)) {
      changed = true;
      log(fmt::format("target pid {} ({}) is gone", pid, p.comm));
    }
  targets_ = std::move(now);
  metrics_.set_targets(targets_.size());
  if (changed && started_) {
    header_.target.pids.clear();
    for (const auto& [pid, p] : targets_) header_.target.pids.push_back(pid);
    if (!targets_.empty()) {
      header_.target.comm = targets_.begin()->second.comm;
      header_.target.exe = targets_.begin()->second.exe;
    }
    json h = trace::to_json(header_);
    flight_->set_header(h);
  }
  std::vector<int> pids;
  for (const auto& [pid, p] : targets_) pids.push_back(pid);
  return pids;
}

void Service::on_start(const trace::TraceHeader& header) {
  header_ = header;
  started_ = true;
  const uint64_t now = header.start_mono_ns.value_or(host::monotonic_now_ns());
  count_from_ns_ = now;
  next_cut_ns_ = now + options_.window_ms * util::kNsPerMs;
  last_flush_ns_ = now;
  advance_clock(now);
  flight_->start(trace::to_json(header_), now);
}

void Service::on_record(const ld_hdr& rec, size_t size) {
  flight_->append(rec, size);
  buffer_.append(rec, size);
  advance_clock(rec.ts_ns);
}

void Service::update_agent_metrics() { metrics_.set_agent(own_cpu_seconds(), own_rss_bytes()); }

void Service::on_wake(uint64_t now, const SessionHooks& hooks) {
  advance_clock(now);
  // Under load the ring wakes the agent more often than the read interval: targets are looked
  // for once a read interval at most.
  if (now - last_discovery_ns_ >= options_.flush_ms * util::kNsPerMs) {
    last_discovery_ns_ = now;
    refresh_targets(&hooks);
  }
  if (now - last_flush_ns_ >= options_.flush_ms * util::kNsPerMs) {
    last_flush_ns_ = now;
    std::vector<model::ProbeStatus> probes;
    {
      std::lock_guard lock(mu_);
      probes = last_probes_;
    }
    if (auto problem = flight_->tick(now, segment_trailer(probes, now)); !problem.empty()) log(problem);
    metrics_.set_flight_bytes(flight_->disk_bytes());
  }
  if (now >= next_cut_ns_) cut_window(now, hooks);
  std::lock_guard lock(mu_);
  if (pending_capture_ && now >= capture_due_ns_) {
    pending_capture_->capture_to_ns = now;
    jobs_.push_back(std::move(*pending_capture_));
    pending_capture_.reset();
    cv_.notify_all();
  }
}

void Service::cut_window(uint64_t now, const SessionHooks& hooks) {
  {
    std::lock_guard lock(mu_);
    // The analysis thread is still on the last one: this window grows until it is free.
    if (busy_ || std::any_of(jobs_.begin(), jobs_.end(), [](const Job& j) { return j.kind == Job::kWindow; })) return;
  }
  update_agent_metrics();
  auto probes = hooks.status ? hooks.status() : std::vector<model::ProbeStatus>{};
  metrics_.set_probes(probes);
  Job job;
  job.kind = Job::kWindow;
  job.window.blocks = buffer_.snapshot();
  job.window.header = header_;
  job.window.probes = probes;
  job.window.count_from_ns = count_from_ns_;
  const uint64_t settle = options_.settle_ms * util::kNsPerMs;
  job.window.count_to_ns = std::max(count_from_ns_, now > settle ? now - settle : 0);
  job.window.end_ns = now;
  count_from_ns_ = job.window.count_to_ns;
  next_cut_ns_ = now + options_.window_ms * util::kNsPerMs;
  const uint64_t lookback = options_.lookback_ms * util::kNsPerMs;
  buffer_.drop_before(count_from_ns_ > lookback ? count_from_ns_ - lookback : 0);
  const uint64_t dropped = buffer_.take_dropped();
  metrics_.records_dropped(dropped);
  std::lock_guard lock(mu_);
  last_probes_ = std::move(probes);
  jobs_.push_back(std::move(job));
  cv_.notify_all();
}

void Service::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return jobs_.empty() && !busy_; });
}

std::string Service::reload_rules() {
  try {
    auto fresh = std::make_shared<const rules::RuleSet>(rules::load_rules(options_.rules_paths));
    size_t count = fresh->rules.size();
    size_t errors = fresh->errors.size();
    {
      std::lock_guard lock(mu_);
      rules_ = std::move(fresh);
    }
    return fmt::format("rules reloaded: {} rules{}", count,
                       errors ? fmt::format(", {} problem(s) skipped (latency-doctor rules check)", errors) : "");
  } catch (const std::exception& e) {
    return fmt::format("rules not reloaded, the ones in force stay: {}", e.what());
  }
}

void Service::finish(const trace::TraceTrailer& trailer) {
  drain();
  flight_->finish(trace::to_json(trailer));
}

DumpAnswer Service::dump(uint64_t since_ms) {
  DumpAnswer answer;
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = fmt::format("{}/.dump-{}-{}.ldtrace", options_.flight.dir, getpid(), counter++);
  // "The last N seconds" of the stream, by its own clock: a replayed trace's times are not this
  // host's. A live stream's trails the host's by a read interval at most, and what came after
  // its last wake-up is not in the recorder yet.
  const uint64_t stream_now = stream_now_ns_.load(std::memory_order_relaxed);
  const uint64_t now = stream_now > 0 ? stream_now : host::monotonic_now_ns();
  const uint64_t span = since_ms * util::kNsPerMs;
  std::vector<model::ProbeStatus> probes;
  {
    std::lock_guard lock(mu_);
    probes = last_probes_;
  }
  try {
    auto stats = flight_->dump(tmp, now > span ? now - span : 0, now, segment_trailer(probes, now));
    answer.fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    unlink(tmp.c_str());  // the open fd keeps it until it is sent
    if (answer.fd < 0) answer.error = fmt::format("cannot reopen the dump: {}", std::strerror(errno));
    answer.records = stats.records;
    answer.segments = stats.segments;
    answer.warnings = std::move(stats.warnings);
  } catch (const std::exception& e) {
    unlink(tmp.c_str());
    answer.error = e.what();
  }
  return answer;
}

void Service::worker() {
  // Analysis is never urgent: it yields to the server's threads. SCHED_BATCH (no wake-up
  // preemption) at nice 19 (a small share while the CPUs are busy).
  sched_param param{};
  sched_setscheduler(0, SCHED_BATCH, &param);
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, nothing left
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      if (job.kind == Job::kWindow) run_window(job.window);
      else run_capture(job);
    } catch (const std::exception& e) {
      log(fmt::format("{} failed: {}", job.kind == Job::kWindow ? "window analysis" : "capture", e.what()));
    }
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void Service::run_window(const WindowInput& input) {
  std::shared_ptr<const rules::RuleSet> rules;
  {
    std::lock_guard lock(mu_);
    rules = rules_;
  }
  WindowResult result = analyze_window(input, *rules);
  metrics_.add_window(result.observed);
  metrics_.window_done(result.analysis_seconds, result.records);

  // Findings that appear or clear: a line each, and a span for the new ones.
  std::vector<exporter::Span> finding_spans;
  const auto& report = result.report;
  const int64_t offset = report.realtime_minus_monotonic_ns;
  std::string crit;
  for (const auto& f : report.findings) {
    if (f.severity == "crit" && crit.empty()) crit = f.rule;
    if (active_findings_.count(f.rule)) continue;
    log(fmt::format("finding {} ({}): {}", f.rule, f.severity, f.title));
    exporter::Span span;
    span.name = "finding " + f.rule;
    span.start_unix_ns = model::mono_to_unix_ns(input.count_from_ns, offset);
    span.end_unix_ns = model::mono_to_unix_ns(input.count_to_ns, offset);
    span.attributes = {{"latency_doctor.finding.rule", f.rule},
                       {"latency_doctor.finding.severity", f.severity},
                       {"latency_doctor.finding.cause", std::string(model::cause_id(f.cause))},
                       {"latency_doctor.finding.title", f.title},
                       {"latency_doctor.finding.evidence", f.evidence},
                       {"latency_doctor.finding.remedy", f.remedy}};
    finding_spans.push_back(std::move(span));
  }
  for (const auto& [rule, severity] : active_findings_)
    if (!result.observed.findings.count(rule)) log(fmt::format("finding {} cleared", rule));
  active_findings_ = result.observed.findings;

  // Triggers: a capture around this window, taken once the after-trigger time has passed.
  std::string reason;
  if (options_.capture_ttft_p99_s > 0 && result.ttft_p99_s > options_.capture_ttft_p99_s) reason = "ttft_p99";
  else if (options_.capture_on_crit && !crit.empty()) reason = "crit_finding";
  if (!reason.empty()) {
    std::lock_guard lock(mu_);
    const uint64_t now = input.end_ns;
    const bool cooling = captured_once_ && now - last_capture_ns_ < options_.capture_cooldown_ms * util::kNsPerMs;
    if (!pending_capture_ && !cooling) {
      Job job;
      job.kind = Job::kCapture;
      job.capture_reason = reason == "ttft_p99" ? reason : "crit_finding";
      const uint64_t before = options_.capture_before_ms * util::kNsPerMs;
      job.capture_from_ns = input.count_from_ns > before ? input.count_from_ns - before : 0;
      pending_capture_ = std::move(job);
      capture_due_ns_ = now + options_.capture_after_ms * util::kNsPerMs;
      last_capture_ns_ = now;
      captured_once_ = true;
      log(fmt::format(
          "trigger {}{}: capturing the flight recorder from {} s before to {} s after", reason,
          reason == "ttft_p99" ? fmt::format(" ({:.0f} ms)", util::s_to_ms(result.ttft_p99_s)) : " (" + crit + ")",
          options_.capture_before_ms / util::kMsPerSec, options_.capture_after_ms / util::kMsPerSec));
    }
  }
  if (otlp_) export_otlp(result, finding_spans);
}

void Service::export_otlp(const WindowResult& result, const std::vector<exporter::Span>& finding_spans) {
  const auto& report = result.report;
  const int64_t offset = report.realtime_minus_monotonic_ns;
  for (size_t index : result.outliers) {
    const auto& o = report.outliers[index];
    exporter::Span span;
    span.name = o.kind == model::WindowKind::kTtft ? "slow first token" : "slow token gap";
    span.start_unix_ns = model::mono_to_unix_ns(o.start_mono_ns, offset);
    span.end_unix_ns = model::mono_to_unix_ns(o.end_mono_ns, offset);
    json causes = json::array();
    for (const auto& c : o.causes) causes.push_back(std::string(model::cause_id(c.cause)));
    span.attributes = {{"latency_doctor.outlier.kind", std::string(model::window_kind_name(o.kind))},
                       {"latency_doctor.outlier.duration_ms", o.duration_ms},
                       {"latency_doctor.outlier.baseline_ms", o.baseline_ms},
                       {"latency_doctor.outlier.request", o.request},
                       {"latency_doctor.outlier.token_index", o.token_index},
                       {"thread.id", o.tid},
                       {"latency_doctor.target.comm", report.target.comm},
                       {"latency_doctor.causes", causes}};
    for (const auto& c : o.causes) {
      const std::string id(model::cause_id(c.cause));
      span.attributes.push_back({"latency_doctor.cause." + id + ".ms", c.ms});
      // The evidence names the culprits (the waker, the lock holder, the file, the neighbour).
      if (!c.evidence.empty())
        span.attributes.push_back({"latency_doctor.cause." + id + ".evidence", c.evidence.dump()});
    }
    pending_spans_.push_back(std::move(span));
  }
  for (const auto& s : finding_spans) pending_spans_.push_back(s);
  // Bounded while the collector is away: the oldest spans go first.
  constexpr size_t kMaxPending = 4096;
  if (pending_spans_.size() > kMaxPending)
    pending_spans_.erase(pending_spans_.begin(), pending_spans_.end() - kMaxPending);

  const uint64_t now_unix = host::realtime_now_ns();
  std::string error = otlp_->post(
      "/v1/metrics", exporter::otlp_metrics_request(metrics_.collect(), resource_, start_unix_ns_, now_unix).dump());
  if (!error.empty()) metrics_.otlp_failed("metrics");
  std::string span_error;
  if (!pending_spans_.empty()) {
    span_error = otlp_->post("/v1/traces", exporter::otlp_traces_request(pending_spans_, resource_).dump());
    if (span_error.empty()) pending_spans_.clear();
    else metrics_.otlp_failed("traces");
  }
  if (error.empty()) error = span_error;
  if (!error.empty()) {
    // The first failure and every 30th after it: a collector away for an hour is one line a few minutes.
    if (otlp_failures_++ % 30 == 0)
      log(fmt::format("OTLP export to {} failed: {} ({} spans kept for the next try)", otlp_->endpoint(), error,
                      pending_spans_.size()));
  } else if (otlp_failures_) {
    log(fmt::format("OTLP export to {} works again", otlp_->endpoint()));
    otlp_failures_ = 0;
  }
}

void Service::run_capture(const Job& job) {
  const uint64_t unix_now = host::realtime_now_ns();
  const std::string path =
      fmt::format("{}/capture-{}-{}.ldtrace", captures_dir(), utc_stamp(unix_now), safe_name(job.capture_reason));
  std::vector<model::ProbeStatus> probes;
  {
    std::lock_guard lock(mu_);
    probes = last_probes_;
  }
  auto stats = flight_->dump(path, job.capture_from_ns, job.capture_to_ns, segment_trailer(probes, job.capture_to_ns));
  metrics_.capture_taken(job.capture_reason);
  log(fmt::format("capture written: {} ({} records; latency-doctor report {})", path, stats.records, path));
  // Keep the newest captures_max.
  std::vector<std::string> captures;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(captures_dir(), ec))
    if (entry.path().filename().string().rfind("capture-", 0) == 0) captures.push_back(entry.path().string());
  std::sort(captures.begin(), captures.end());
  while (captures.size() > options_.captures_max) {
    fs::remove(captures.front(), ec);
    captures.erase(captures.begin());
  }
}

}  // namespace ld::serve
