// A recorded trace from tests/fixtures/golden, held in memory and handed out a second at a time
// as the recorder's wake-ups would: the daemon's and top's pipelines driven without BPF.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "events.h"
#include "trace/trace_file.hpp"
#include "trace/trace_header.hpp"

namespace ld::test {

struct RecordedTrace {
  std::vector<std::vector<uint8_t>> records;
  trace::TraceMeta meta;
  uint64_t first = UINT64_MAX, last = 0;  // the records' times

  // server-disk: 6 requests, 114 gaps, disk_io outliers.
  explicit RecordedTrace(const std::string& name = "server-disk.ldtrace") {
    auto summary = trace::read_trace(std::string(LD_TEST_FIXTURES_DIR) + "/golden/" + name, [&](const ld_hdr& rec) {
      auto* b = reinterpret_cast<const uint8_t*>(&rec);
      records.emplace_back(b, b + rec.size);
    });
    meta = trace::read_meta(summary.header, summary.trailer);
    for (const auto& r : records)
      if (const uint64_t ts = at(r).ts_ns) {
        first = std::min(first, ts);
        last = std::max(last, ts);
      }
    meta.header.start_mono_ns = first;
  }
  static const ld_hdr& at(const std::vector<uint8_t>& r) { return *reinterpret_cast<const ld_hdr*>(r.data()); }

  // feed(rec, size) for the records of each second, then step(now), a second at a time up to `until`.
  template <typename Feed, typename Step>
  void replay(uint64_t until, Feed&& feed, Step&& step) const {
    size_t next = 0;
    for (uint64_t now = first + 1'000'000'000ULL; now <= until; now += 1'000'000'000ULL) {
      for (; next < records.size() && at(records[next]).ts_ns < now; ++next)
        feed(at(records[next]), records[next].size());
      step(now);
    }
  }
};

}  // namespace ld::test
