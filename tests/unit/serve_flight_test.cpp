// serve's flight recorder (segments, limits, dump of a time range, a kill mid-segment), its
// dump socket, and the whole daemon pipeline without BPF: a recorded trace replayed through
// serve::Service to its metrics and an OTLP receiver.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include "events.h"
#include "recorded_trace.hpp"
#include "serve/dump_socket.hpp"
#include "serve/flight_recorder.hpp"
#include "serve/service.hpp"
#include "test_http_receiver.hpp"
#include "trace/trace_file.hpp"
#include "trace/trace_header.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct TempDir {
  fs::path path;
  TempDir()
      : path(fs::temp_directory_path() / ("ld-flight-" + std::to_string(getpid()) + "-" + std::to_string(next++))) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static inline int next = 0;
};

void append(ld::serve::FlightRecorder& flight, uint64_t ts, uint16_t type = 999) {
  alignas(8) unsigned char rec[48] = {};
  auto* h = reinterpret_cast<ld_hdr*>(rec);
  h->type = type;
  h->size = sizeof(rec);
  h->ts_ns = ts;
  flight.append(*h, sizeof(rec));
}

json header() {
  ld::trace::TraceHeader h;
  h.agent_version = "test";
  h.target.pids = {42};
  return ld::trace::to_json(h);
}

std::vector<uint64_t> times_in(const std::string& path, ld::trace::ReadSummary* summary = nullptr) {
  std::vector<uint64_t> ts;
  auto s = ld::trace::read_trace(path, [&](const ld_hdr& rec) { ts.push_back(rec.ts_ns); });
  if (summary) *summary = s;
  return ts;
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  stat(path.c_str(), &st);
  return st.st_mode & 0777;
}

}  // namespace

TEST(ServeFlight, SegmentsRotateAndDumpCutsATimeRange) {
  TempDir dir;
  ld::serve::FlightOptions o;
  o.dir = (dir.path / "flight").string();
  o.segment_ms = 1000;  // 1 s of (fake) time a segment
  ld::serve::FlightRecorder flight(o);
  EXPECT_EQ(mode_of(o.dir), 0700u);
  const uint64_t t0 = 5'000'000'000;
  flight.start(header(), t0);
  for (int s = 0; s < 5; ++s) {
    for (int i = 0; i < 100; ++i) append(flight, t0 + s * 1'000'000'000ULL + i * 10'000'000ULL);
    flight.tick(t0 + (s + 1) * 1'000'000'000ULL, json::object());
  }
  auto segments = flight.segments();
  EXPECT_GE(segments.size(), 5u);
  for (const auto& s : segments) EXPECT_EQ(mode_of(s), 0600u) << s;
  // Seconds 1 and 2 only.
  const std::string out = (dir.path / "cut.ldtrace").string();
  auto stats = flight.dump(out, t0 + 1'000'000'000ULL, t0 + 2'999'999'999ULL, json::object());
  EXPECT_EQ(stats.records, 200u);
  EXPECT_EQ(mode_of(out), 0600u);
  ld::trace::ReadSummary summary;
  auto ts = times_in(out, &summary);
  ASSERT_EQ(ts.size(), 200u);
  EXPECT_EQ(ts.front(), t0 + 1'000'000'000ULL);
  EXPECT_EQ(summary.trailer.value("stop_reason", ""), "dump");
  EXPECT_EQ(summary.header["target"]["pids"], json::array({42}));
}

TEST(ServeFlight, DiskCapRemovesTheOldestSegments) {
  TempDir dir;
  ld::serve::FlightOptions o;
  o.dir = dir.path.string();
  o.segment_ms = 1;
  o.max_bytes = 64 * 1024;
  ld::serve::FlightRecorder flight(o);
  flight.start(header(), 1);
  // Incompressible-ish records (distinct times) across many segments.
  for (uint64_t s = 0; s < 40; ++s) {
    for (uint64_t i = 0; i < 2000; ++i) append(flight, (s << 32) + i * 7919 + s);
    flight.tick((s + 1) << 32, json::object());
  }
  EXPECT_LE(flight.disk_bytes(), o.max_bytes + (1u << 20));  // the cap, plus the open segment
  EXPECT_LT(flight.segments().size(), 40u);
}

TEST(ServeFlight, AKilledRecorderLeavesSegmentsThatReadBackToTheLastFlush) {
  TempDir dir;
  ld::serve::FlightOptions o;
  o.dir = dir.path.string();
  std::string path;
  {
    auto flight = std::make_unique<ld::serve::FlightRecorder>(o);
    flight->start(header(), 1);
    for (uint64_t i = 1; i <= 300; ++i) append(*flight, i);
    flight->flush();
    for (uint64_t i = 301; i <= 310; ++i) append(*flight, i);  // not flushed: lost with the process
    path = flight->current_segment();
    // What a SIGKILL leaves: the file as written so far, without a trailer. Copy it before the
    // destructor would flush the rest.
    fs::copy_file(path, dir.path / "killed.ldtrace");
  }
  ld::trace::ReadSummary summary;
  auto ts = times_in((dir.path / "killed.ldtrace").string(), &summary);
  EXPECT_EQ(ts.size(), 300u);
  EXPECT_TRUE(summary.trailer.is_null());
  EXPECT_EQ(summary.chunks_bad, 0u);
}

TEST(ServeDumpSocket, StreamsTheTraceToTheClientOverA0600Socket) {
  TempDir dir;
  const std::string sock = (dir.path / "run" / "serve.sock").string();
  const std::string file = (dir.path / "payload").string();
  std::ofstream(file) << std::string(200000, 'x');
  uint64_t asked = 0;
  ld::serve::DumpServer server(sock, [&](uint64_t since_ms) {
    asked = since_ms;
    ld::serve::DumpAnswer a;
    a.fd = ::open(file.c_str(), O_RDONLY);
    a.records = 7;
    return a;
  });
  EXPECT_EQ(mode_of(sock), 0600u);
  EXPECT_EQ(mode_of((dir.path / "run").string()), 0700u);
  const std::string out = (dir.path / "out").string();
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  auto got = ld::serve::request_dump(sock, 600000, fd);
  close(fd);
  EXPECT_EQ(asked, 600000u);
  EXPECT_EQ(got.records, 7u);
  EXPECT_EQ(got.bytes, 200000u);
  EXPECT_EQ(fs::file_size(out), 200000u);
  // A second server on the same socket is refused while the first runs.
  EXPECT_THROW(ld::serve::DumpServer(sock, [](uint64_t) { return ld::serve::DumpAnswer{}; }), std::runtime_error);
}

TEST(ServeDumpSocket, NoServerIsAOneLineError) {
  TempDir dir;
  try {
    ld::serve::request_dump((dir.path / "none.sock").string(), 1000, 1);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no latency-doctor serve"), std::string::npos);
  }
}

// The recorded disk_io trace as the probes would hand it, fed to `service` second by second;
// `step(now)` runs at each second (a wake-up, a cut).
struct Replay : ld::test::RecordedTrace {
  template <typename Step>
  void run(ld::serve::Service& service, uint64_t until, Step step) {
    service.on_start(meta.header);
    replay(
        until, [&](const ld_hdr& rec, size_t size) { service.on_record(rec, size); },
        [&](uint64_t now) {
          step(now);
          service.drain();
        });
  }
};

// The daemon's pipeline without BPF: the recorded disk_io trace fed to Service as the probes
// would, windows cut as the read intervals would, metrics and OTLP checked.
TEST(ServeService, ReplayedTraceReachesMetricsOtlpAndDump) {
  TempDir dir;
  ld::test::HttpReceiver collector;
  ld::serve::ServeOptions o;
  o.metrics_addr = "";
  o.flight.dir = (dir.path / "flight").string();
  o.socket_path = (dir.path / "serve.sock").string();
  o.otlp_endpoint = "http://127.0.0.1:" + std::to_string(collector.port());
  o.window_ms = 1000;
  o.settle_ms = 100;
  o.quiet = true;
  o.capture_on_crit = false;
  ld::serve::Service service(o);

  Replay replay;
  ld::serve::SessionHooks hooks;
  hooks.status = [&] { return replay.meta.trailer.probes; };
  replay.run(service, replay.last + 2'000'000'000ULL, [&](uint64_t now) { service.cut_window(now, hooks); });
  const auto& records = replay.records;
  const std::string text = prometheus::TextSerializer().Serialize(service.metrics().collect());
  EXPECT_NE(text.find("gen_ai_server_time_to_first_token_seconds_count 6"), std::string::npos) << text;
  EXPECT_NE(text.find("gen_ai_server_time_per_output_token_seconds_count 114"), std::string::npos) << text;
  EXPECT_NE(text.find("latency_doctor_outlier_seconds_total{cause=\"disk_io\"}"), std::string::npos) << text;

  // OTLP: metrics every window, one span per outlier.
  size_t metric_posts = 0, spans = 0;
  for (const auto& r : collector.requests()) {
    json body = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << r.path;
    if (r.path == "/v1/metrics") metric_posts++;
    if (r.path == "/v1/traces")
      for (const auto& s : body["resourceSpans"][0]["scopeSpans"][0]["spans"])
        if (s["name"].get<std::string>().rfind("slow ", 0) == 0) spans++;
  }
  EXPECT_GT(metric_posts, 3u);
  double outliers = 0;
  for (const auto& family : service.metrics().collect())
    if (family.name == "latency_doctor_outliers_total")
      for (const auto& m : family.metric) outliers += m.counter.value;
  EXPECT_GT(spans, 0u);
  EXPECT_EQ(static_cast<double>(spans), outliers);

  // The dump socket cuts the flight recorder: everything replayed is in it.
  const std::string out = (dir.path / "dump.ldtrace").string();
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  // The replayed times are from when the trace was recorded: ask for everything since boot.
  auto got = ld::serve::request_dump(o.socket_path, 1'000'000'000'000ULL, fd);
  close(fd);
  EXPECT_EQ(got.records, records.size());
  EXPECT_EQ(times_in(out).size(), records.size());
}

// A trigger (here: any first token over 1 us) saves the flight recorder around it once the
// after-trigger time has passed, as a trace `report` reads; the cooldown keeps it to one.
TEST(ServeService, ATriggerSavesOneCaptureAroundIt) {
  TempDir dir;
  ld::serve::ServeOptions o;
  o.metrics_addr = "";
  o.flight.dir = (dir.path / "flight").string();
  o.socket_path = (dir.path / "serve.sock").string();
  o.window_ms = 1000;
  o.settle_ms = 100;
  o.flush_ms = 1000;
  o.quiet = true;
  o.capture_on_crit = false;
  o.capture_ttft_p99_s = 1e-6;
  o.capture_before_ms = 5000;
  o.capture_after_ms = 2000;
  ld::serve::Service service(o);
  Replay replay;
  ld::serve::SessionHooks hooks;
  hooks.status = [&] { return replay.meta.trailer.probes; };
  replay.run(service, replay.last + 4'000'000'000ULL, [&](uint64_t now) { service.on_wake(now, hooks); });

  std::vector<std::string> captures;
  for (const auto& e : fs::directory_iterator(service.captures_dir())) captures.push_back(e.path().string());
  ASSERT_EQ(captures.size(), 1u);
  EXPECT_NE(captures[0].find("ttft_p99"), std::string::npos) << captures[0];
  EXPECT_EQ(mode_of(captures[0]), 0600u);
  EXPECT_EQ(mode_of(service.captures_dir()), 0700u);
  ld::trace::ReadSummary summary;
  auto ts = times_in(captures[0], &summary);
  EXPECT_GT(ts.size(), 0u);
  EXPECT_LT(ts.size(), replay.records.size());  // a time range, not the whole recording
  EXPECT_EQ(summary.chunks_bad, 0u);
  EXPECT_EQ(summary.trailer.value("stop_reason", ""), "dump");
  const std::string text = prometheus::TextSerializer().Serialize(service.metrics().collect());
  EXPECT_NE(text.find("latency_doctor_captures_total{trigger=\"ttft_p99\"} 1"), std::string::npos) << text;
}
