// libFuzzer target for the .ldtrace reader: it must never crash, hang or overread, whatever
// the bytes.
//
// Two modes, chosen by the first byte:
//  - 'L' (as in "LDTRACE"): the input is a whole trace file, read as is. Seed with real traces.
//  - anything else: the rest of the input becomes the content of one valid chunk (EVENTS when
//    the first byte is even, TRAILER when odd) behind a valid file header. Chunk CRCs and zlib
//    would otherwise stop the fuzzer from ever reaching the record walker and trailer parser
//    with arbitrary content.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "events.h"
#include "trace/trace_file.hpp"

namespace {

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<uint8_t>(v >> (8 * k)));
}

// The layout from trace_file.hpp, built by hand so the CRCs are right.
std::vector<uint8_t> wrap_in_trace(uint32_t kind, const uint8_t* raw, size_t raw_len) {
  static const std::string header = "{\"fuzz\":true}";
  std::vector<uint8_t> out = {'L', 'D', 'T', 'R', 'A', 'C', 'E', '\0'};
  put_u32(out, ld::trace::kFormatVersion);
  put_u32(out, static_cast<uint32_t>(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  put_u32(out, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(header.data()), header.size())));

  uLongf clen = compressBound(raw_len);
  std::vector<uint8_t> comp(clen);
  if (compress2(comp.data(), &clen, raw, raw_len, 1) != Z_OK) return {};
  out.insert(out.end(), {'L', 'D', 'C', 'K'});
  put_u32(out, kind);
  put_u32(out, static_cast<uint32_t>(clen));
  put_u32(out, static_cast<uint32_t>(raw_len));
  put_u32(out, static_cast<uint32_t>(crc32(0, comp.data(), static_cast<uInt>(clen))));
  out.insert(out.end(), comp.begin(), comp.begin() + static_cast<ptrdiff_t>(clen));
  return out;
}

volatile uint64_t g_sink_sum;

// Reads every byte the record claims to have, so ASan flags a record handed over short.
void touch(const ld_hdr& rec) {
  const auto* p = reinterpret_cast<const uint8_t*>(&rec);
  uint64_t sum = 0;
  for (size_t i = 0; i < rec.size; ++i) sum += p[i];
  g_sink_sum = g_sink_sum + sum;
}

void read(const uint8_t* data, size_t size) {
  try {
    ld::trace::ReadSummary s = ld::trace::read_trace_bytes(data, size, "fuzz.ldtrace", touch);
    g_sink_sum = g_sink_sum + s.records + s.warnings.size();
  } catch (const ld::trace::TraceError&) {
    // The documented outcome for inputs that are not a readable trace.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 0 && data[0] != 'L') {
    uint32_t kind = (data[0] & 1) ? 2 : 1;
    std::vector<uint8_t> trace = wrap_in_trace(kind, data + 1, size - 1);
    read(trace.data(), trace.size());
    return 0;
  }
  read(data, size);
  return 0;
}
