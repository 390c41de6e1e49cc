// libFuzzer target for everything after the trace reader: arbitrary event records through the
// EventAnalyzer (with thread tracks kept) and every report format. Must never crash or hang.
//
// The input is a sequence of records, each starting with struct ld_hdr whose `size` gives its
// length (clamped to what is left), delivered like the reader does: 8-aligned, zero-padded
// to at least 256 bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/event_analyzer.hpp"
#include "events.h"
#include "report/report.hpp"

namespace {

volatile size_t g_sink;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ld::analysis::EventAnalyzer analyzer;
  analyzer.keep_thread_tracks();
  alignas(8) unsigned char record[65536 + 256];
  for (size_t at = 0; at + sizeof(ld_hdr) <= size;) {
    ld_hdr hdr;
    std::memcpy(&hdr, data + at, sizeof hdr);
    const size_t len = std::clamp<size_t>(hdr.size, sizeof(ld_hdr), size - at);
    std::memset(record, 0, std::max<size_t>(len, 256));
    std::memcpy(record, data + at, len);
    reinterpret_cast<ld_hdr*>(record)->size = static_cast<uint16_t>(len);
    analyzer.on_record(*reinterpret_cast<const ld_hdr*>(record), len);
    at += len;
  }
  const nlohmann::json header = {{"clock", {{"start_mono_ns", 0}, {"realtime_minus_monotonic_ns", 1000}}},
                                 {"host", {{"machine", "x86_64"}}},
                                 {"target", {{"pids", {1}}, {"comm", "fuzz"}}}};
  const auto report = analyzer.finish(header, nlohmann::json::object(), "sse", {});
  g_sink = ld::report::render_html(report).size() + ld::report::render_markdown(report).size() +
           ld::report::render_perfetto(report).size();
  return 0;
}
