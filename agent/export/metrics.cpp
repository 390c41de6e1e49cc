#include "export/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace ld::exporter {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

const std::vector<double>& ServeMetrics::ttft_buckets() {
  // OpenTelemetry GenAI semconv, gen_ai.server.time_to_first_token (explicit bucket advice).
  static const std::vector<double> b{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                     0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0};
  return b;
}

const std::vector<double>& ServeMetrics::tpot_buckets() {
  // gen_ai.server.time_per_output_token's advice starts at 10 ms; a server streaming a token
  // every 2-8 ms would sit in its first bucket, so 1, 2.5 and 5 ms come before it.
  static const std::vector<double> b{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
                                     0.15,  0.2,    0.3,   0.4,  0.5,   0.75, 1.0,   2.5};
  return b;
}

struct ServeMetrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer;
  std::mutex mu;  // the delta bookkeeping below (the metrics themselves are atomic)

  Family<Histogram>& ttft =
      prometheus::BuildHistogram()
          .Name("gen_ai_server_time_to_first_token_seconds")
          .Help(
              "Time from a request's arrival (its request line received) to its first token sent, "
              "seen from the server's socket sends (OpenTelemetry gen_ai.server.time_to_first_token)")
          .Register(*registry);
  Family<Histogram>& tpot = prometheus::BuildHistogram()
                                .Name("gen_ai_server_time_per_output_token_seconds")
                                .Help(
                                    "Time between two token sends of one response, the first token excluded "
                                    "(OpenTelemetry gen_ai.server.time_per_output_token)")
                                .Register(*registry);
  Family<Counter>& outlier_seconds =
      prometheus::BuildCounter()
          .Name("latency_doctor_outlier_seconds_total")
          .Help("Time of slow first tokens and slow token gaps (outliers), split by cause")
          .Register(*registry);
  Family<Counter>& outliers = prometheus::BuildCounter()
                                  .Name("latency_doctor_outliers_total")
                                  .Help("Slow first tokens (kind=ttft) and slow token gaps (kind=tpot) found")
                                  .Register(*registry);
  Family<Gauge>& findings = prometheus::BuildGauge()
                                .Name("latency_doctor_findings")
                                .Help("1 while the rule's finding holds in the latest analysis window, else 0")
                                .Register(*registry);
  Family<Counter>& events = prometheus::BuildCounter()
                                .Name("latency_doctor_events_total")
                                .Help("Events the probe recorded")
                                .Register(*registry);
  Family<Counter>& lost = prometheus::BuildCounter()
                              .Name("latency_doctor_events_lost_total")
                              .Help("Events the probe lost (kernel ring buffer full): raise --ringbuf-size")
                              .Register(*registry);
  Counter& cpu = prometheus::BuildCounter()
                     .Name("latency_doctor_agent_cpu_seconds_total")
                     .Help("CPU time of the agent itself, user + system, all its threads")
                     .Register(*registry)
                     .Add({});
  Gauge& rss = prometheus::BuildGauge()
                   .Name("latency_doctor_agent_rss_bytes")
                   .Help("Resident memory of the agent itself")
                   .Register(*registry)
                   .Add({});
  Gauge& targets = prometheus::BuildGauge()
                       .Name("latency_doctor_targets")
                       .Help("Server processes traced now")
                       .Register(*registry)
                       .Add({});
  Counter& discovered =
      prometheus::BuildCounter()
          .Name("latency_doctor_targets_discovered_total")
          .Help("Server processes found and attached to since start (a restarted server counts again)")
          .Register(*registry)
          .Add({});
  Gauge& flight_bytes = prometheus::BuildGauge()
                            .Name("latency_doctor_flight_recorder_bytes")
                            .Help("Disk used by the flight recorder's trace segments")
                            .Register(*registry)
                            .Add({});
  Family<Counter>& captures =
      prometheus::BuildCounter()
          .Name("latency_doctor_captures_total")
          .Help("Automatic captures of the flight recorder, by trigger (ttft_p99, crit_finding)")
          .Register(*registry);
  Counter& windows = prometheus::BuildCounter()
                         .Name("latency_doctor_windows_total")
                         .Help("Analysis windows completed")
                         .Register(*registry)
                         .Add({});
  Gauge& window_seconds = prometheus::BuildGauge()
                              .Name("latency_doctor_window_analysis_seconds")
                              .Help("Wall time the latest window's analysis took")
                              .Register(*registry)
                              .Add({});
  Gauge& window_records = prometheus::BuildGauge()
                              .Name("latency_doctor_window_records")
                              .Help("Records the latest window's analysis read (the window and its look-back)")
                              .Register(*registry)
                              .Add({});
  Counter& window_dropped = prometheus::BuildCounter()
                                .Name("latency_doctor_window_records_dropped_total")
                                .Help("Records dropped from the analysis look-back because it reached --window-memory")
                                .Register(*registry)
                                .Add({});
  Family<Counter>& otlp_failures = prometheus::BuildCounter()
                                       .Name("latency_doctor_otlp_export_failures_total")
                                       .Help("OTLP pushes that failed, by signal (metrics, traces)")
                                       .Register(*registry);

  Histogram& ttft_all = ttft.Add({}, ServeMetrics::ttft_buckets());
  Histogram& tpot_all = tpot.Add({}, ServeMetrics::tpot_buckets());
  std::map<std::string, std::pair<uint64_t, uint64_t>> probe_seen;  // events, lost counted so far
  double cpu_seen = 0;
  std::map<std::string, Gauge*> finding_gauges;  // "rule\nseverity"
};

ServeMetrics::ServeMetrics() : impl_(std::make_unique<Impl>()) {}
ServeMetrics::~ServeMetrics() = default;

void ServeMetrics::serve_http(const std::string& address) {
  try {
    // One thread: a scrape every 15 s or so needs no more, and each is a stack the agent keeps.
    impl_->exposer = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format(
        "--metrics-addr {}: cannot listen there (port in use, or not an address of this host): {}", address, e.what()));
  }
  impl_->exposer->RegisterCollectable(impl_->registry);
}

void ServeMetrics::add_window(const WindowObservations& w) {
  for (double v : w.ttft_s) impl_->ttft_all.Observe(v);
  if (!w.gap_s.empty()) {
    // One pass into bucket increments instead of a locked update per gap; a value on a bound
    // counts in that bound's bucket (le), as Observe() does.
    const auto& bounds = tpot_buckets();
    std::vector<double> increments(bounds.size() + 1, 0.0);
    double sum = 0;
    for (double v : w.gap_s) {
      size_t i = std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin();
      increments[i] += 1;
      sum += v;
    }
    impl_->tpot_all.ObserveMultiple(increments, sum);  // one increment per bucket, +Inf last
  }
  for (const auto& [cause, seconds] : w.outlier_seconds)
    if (seconds > 0) impl_->outlier_seconds.Add({{"cause", cause}}).Increment(seconds);
  for (const auto& [kind, n] : w.outliers)
    if (n > 0) impl_->outliers.Add({{"kind", kind}}).Increment(static_cast<double>(n));
  std::lock_guard lock(impl_->mu);
  for (auto& [key, gauge] : impl_->finding_gauges) gauge->Set(0);
  for (const auto& [rule, severity] : w.findings) {
    auto key = rule + "\n" + severity;
    auto it = impl_->finding_gauges.find(key);
    if (it == impl_->finding_gauges.end())
      it = impl_->finding_gauges.emplace(key, &impl_->findings.Add({{"rule", rule}, {"severity", severity}})).first;
    it->second->Set(1);
  }
}

void ServeMetrics::set_probes(const std::vector<model::ProbeStatus>& probes) {
  std::lock_guard lock(impl_->mu);
  for (const auto& p : probes) {
    if (p.status != model::ProbeState::kAttached) continue;
    auto& seen = impl_->probe_seen[p.name];
    auto& events = impl_->events.Add({{"probe", p.name}});
    auto& lost = impl_->lost.Add({{"probe", p.name}});
    if (p.events > seen.first) events.Increment(static_cast<double>(p.events - seen.first));
    if (p.lost > seen.second) lost.Increment(static_cast<double>(p.lost - seen.second));
    seen = {std::max(seen.first, p.events), std::max(seen.second, p.lost)};
  }
}

void ServeMetrics::set_agent(double cpu_seconds, uint64_t rss_bytes) {
  std::lock_guard lock(impl_->mu);
  if (cpu_seconds > impl_->cpu_seen) {
    impl_->cpu.Increment(cpu_seconds - impl_->cpu_seen);
    impl_->cpu_seen = cpu_seconds;
  }
  impl_->rss.Set(static_cast<double>(rss_bytes));
}

void ServeMetrics::set_targets(size_t targets) { impl_->targets.Set(static_cast<double>(targets)); }
void ServeMetrics::target_discovered() { impl_->discovered.Increment(); }
void ServeMetrics::set_flight_bytes(uint64_t bytes) { impl_->flight_bytes.Set(static_cast<double>(bytes)); }
void ServeMetrics::capture_taken(const std::string& trigger) {
  impl_->captures.Add({{"trigger", trigger}}).Increment();
}

void ServeMetrics::window_done(double analysis_seconds, uint64_t records) {
  impl_->windows.Increment();
  impl_->window_seconds.Set(analysis_seconds);
  impl_->window_records.Set(static_cast<double>(records));
}

void ServeMetrics::records_dropped(uint64_t records) {
  if (records) impl_->window_dropped.Increment(static_cast<double>(records));
}

void ServeMetrics::otlp_failed(const std::string& signal) {
  impl_->otlp_failures.Add({{"signal", signal}}).Increment();
}

std::vector<prometheus::MetricFamily> ServeMetrics::collect() const { return impl_->registry->Collect(); }

}  // namespace ld::exporter
