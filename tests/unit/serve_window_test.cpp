// serve's rolling windows: each first token, token gap and outlier counted in exactly one
// window, by the same analysis `report` runs (a recorded trace replayed in pieces).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include <gtest/gtest.h>

#include "analysis/event_analyzer.hpp"
#include "events.h"
#include "rules/engine.hpp"
#include "serve/window.hpp"
#include "trace/trace_file.hpp"

namespace {

using ld::serve::RecordBuffer;

std::vector<std::vector<uint8_t>> trace_records(const std::string& path, nlohmann::json* header = nullptr,
                                                nlohmann::json* trailer = nullptr) {
  std::vector<std::vector<uint8_t>> out;
  auto summary = ld::trace::read_trace(path, [&](const ld_hdr& rec) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(&rec);
    out.emplace_back(bytes, bytes + rec.size);
  });
  if (header) *header = summary.header;
  if (trailer) *trailer = summary.trailer;
  return out;
}

const ld_hdr& hdr(const std::vector<uint8_t>& r) { return *reinterpret_cast<const ld_hdr*>(r.data()); }

ld::model::RequestRow row(std::string id, uint64_t start, std::vector<uint64_t> tokens) {
  ld::model::RequestRow r;
  r.id = std::move(id);
  r.start_mono_ns = start;
  r.ttft_ms = tokens.empty() ? NAN : static_cast<double>(tokens.front() - start) / 1e6;
  r.token_mono_ns = std::move(tokens);
  return r;
}

}  // namespace

TEST(ServeWindow, RecordBufferKeepsRecordsAlignedAndInOrder) {
  RecordBuffer buffer(1 << 20, 4096);
  std::vector<uint64_t> seen;
  for (uint64_t i = 0; i < 1000; ++i) {
    alignas(8) unsigned char rec[40] = {};
    auto* h = reinterpret_cast<ld_hdr*>(rec);
    h->type = 999;  // a type no reader knows: the buffer does not look inside
    h->size = static_cast<uint16_t>(sizeof(ld_hdr) + (i % 13));  // odd sizes get padded
    h->ts_ns = 1000 + i;
    buffer.append(*h, h->size);
  }
  EXPECT_EQ(buffer.records(), 1000u);
  auto blocks = buffer.snapshot();
  EXPECT_GT(blocks.size(), 1u);
  for (const auto& b : blocks)
    b->for_each([&](const ld_hdr& rec, size_t size) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(&rec) % 8, 0u);
      EXPECT_EQ(size, rec.size);
      seen.push_back(rec.ts_ns);
    });
  ASSERT_EQ(seen.size(), 1000u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1000 + i);
  // Dropping keeps every block that still holds a record at or after the time.
  buffer.drop_before(1500);
  uint64_t first = UINT64_MAX;
  for (const auto& b : buffer.snapshot()) first = std::min(first, b->min_ts);
  EXPECT_LE(first, 1500u);
  EXPECT_LT(buffer.records(), 1000u);
}

TEST(ServeWindow, MemoryCapDropsTheOldestAndCountsThem) {
  RecordBuffer buffer(8192, 1024);
  for (uint64_t i = 0; i < 1000; ++i) {
    alignas(8) unsigned char rec[32] = {};
    auto* h = reinterpret_cast<ld_hdr*>(rec);
    h->size = 32;
    h->ts_ns = i;
    buffer.append(*h, 32);
  }
  EXPECT_LE(buffer.bytes(), 8192u + 1024u);
  EXPECT_GT(buffer.take_dropped(), 700u);
  EXPECT_EQ(buffer.take_dropped(), 0u);
}

TEST(ServeWindow, CountsEachObservationInTheWindowWhereItsTokenWasSent) {
  ld::model::Report report;
  report.request_rows.push_back(row("a", 100, {150, 160, 170, 250}));  // gaps end at 160, 170, 250
  report.request_rows.push_back(row("b", 180, {260}));
  ld::model::Outlier o;
  o.kind = ld::model::WindowKind::kTpot;
  o.request = "a";
  o.end_mono_ns = 250;
  o.duration_ms = 0.08;
  o.causes.push_back({ld::model::Cause::kDiskIo, 0.06, 0.75, {}});
  report.outliers.push_back(o);
  ld::model::Finding f;
  f.rule = "fsync_on_token_path";
  f.severity = "warn";
  report.findings.push_back(f);

  ld::serve::WindowResult first, second;
  ld::serve::count_window(report, 0, 200, first);
  ld::serve::count_window(report, 200, 400, second);
  EXPECT_EQ(first.observed.ttft_s.size(), 1u);   // a's first token at 150
  EXPECT_EQ(second.observed.ttft_s.size(), 1u);  // b's at 260
  EXPECT_EQ(first.observed.gap_s.size(), 2u);
  EXPECT_EQ(second.observed.gap_s.size(), 1u);
  EXPECT_TRUE(first.outliers.empty());
  ASSERT_EQ(second.outliers.size(), 1u);
  EXPECT_NEAR(second.observed.outlier_seconds["disk_io"], 0.06e-3, 1e-12);
  // What no cause explains is counted as unknown: the causes add up to the outlier.
  EXPECT_NEAR(second.observed.outlier_seconds["unknown"], 0.02e-3, 1e-12);
  EXPECT_EQ(second.observed.outliers["tpot"], 1u);
  EXPECT_EQ(second.observed.findings["fsync_on_token_path"], "warn");
  EXPECT_NEAR(ld::serve::p99({1, 2, 3, 4, 100}), 100, 1e-9);
  EXPECT_EQ(ld::serve::p99({}), 0);
}

// The recorded disk_io trace (6 requests, 114 gaps, disk_io outliers) cut into windows of ~1 s:
// the windows together count what one `report` of the whole trace counts.
TEST(ServeWindow, WindowsOfARecordedTraceAddUpToItsReport) {
  const std::string path = std::string(LD_TEST_FIXTURES_DIR) + "/golden/server-disk.ldtrace";
  nlohmann::json header_json, trailer_json;
  auto records = trace_records(path, &header_json, &trailer_json);
  ASSERT_FALSE(records.empty());
  auto meta = ld::trace::read_meta(header_json, trailer_json);

  ld::analysis::EventAnalyzer whole;
  for (const auto& r : records) whole.on_record(hdr(r), r.size());
  auto report = whole.finish(meta, "sse", {});
  ld::rules::RuleSet rules = ld::rules::load_rules({});

  uint64_t first_ts = UINT64_MAX, last_ts = 0;
  for (const auto& r : records)
    if (hdr(r).ts_ns) {
      first_ts = std::min<uint64_t>(first_ts, hdr(r).ts_ns);
      last_ts = std::max<uint64_t>(last_ts, hdr(r).ts_ns);
    }

  RecordBuffer buffer(64u << 20);
  size_t next = 0;
  const uint64_t window = 1'000'000'000, settle = 100'000'000;
  uint64_t count_from = first_ts;
  size_t ttfts = 0, gaps = 0, windows = 0;
  double disk_s = 0, other_s = 0;
  for (uint64_t cut = first_ts + window; count_from <= last_ts; cut += window) {
    while (next < records.size() && hdr(records[next]).ts_ns < cut) {
      buffer.append(hdr(records[next]), records[next].size());
      ++next;
    }
    ld::serve::WindowInput in;
    in.blocks = buffer.snapshot();
    in.header = meta.header;
    in.probes = meta.trailer.probes;
    in.count_from_ns = count_from;
    in.count_to_ns = cut - settle;
    in.end_ns = cut;
    auto result = ld::serve::analyze_window(in, rules);
    ttfts += result.observed.ttft_s.size();
    gaps += result.observed.gap_s.size();
    for (const auto& [cause, s] : result.observed.outlier_seconds) (cause == "disk_io" ? disk_s : other_s) += s;
    count_from = cut - settle;
    ++windows;
  }
  EXPECT_GT(windows, 3u);
  EXPECT_EQ(ttfts, report.requests);
  EXPECT_EQ(gaps, report.gaps);
  EXPECT_GT(disk_s, other_s) << "the disk_io outliers' time by cause";
}
