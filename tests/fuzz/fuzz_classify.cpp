// libFuzzer target for what the kernel makes of socket payloads and what user space makes of
// that: the payload classifier and the HTTP/2 frame walk (bpf/classify.h, run here as the BPF
// programs run it, over stale bytes), then socket timelines built from records of any content.
//
// Two modes, chosen by the first byte:
//  - even: the rest is one payload, classified and walked; the walk's entries must stay in
//    bounds and say what a frame may say;
//  - odd: the rest is a run of ld_sock_io / ld_h2_frames / ld_sock_close records (a byte picks
//    the type, the struct's bytes follow), given to SocketTimelineBuilder: any order, any
//    values, no crash, no endless loop.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "analysis/timeline.hpp"
#include "classify.h"
#include "events.h"

namespace {

volatile uint64_t g_sink;

void classify_payload(const uint8_t* data, size_t size) {
  static ld_scratch scratch;
  std::memset(&scratch, size ? data[0] : 0, sizeof scratch);  // what an earlier payload left
  const size_t n = size < LD_SCRATCH_BYTES ? size : LD_SCRATCH_BYTES;
  std::memcpy(scratch.b, data, n);
  scratch.b[n] = 0;
  g_sink = g_sink + static_cast<uint64_t>(ld_classify(&scratch, static_cast<unsigned>(n)));
  ld_h2_seen seen{};
  const int h2 = ld_h2_walk(&scratch, static_cast<unsigned>(n), size + (size ? data[0] : 0), &seen);
  if (seen.count > LD_H2_MAX_FRAMES) abort();
  for (unsigned i = 0; h2 && i < seen.count; ++i) {
    const ld_h2_frame& f = seen.f[i];
    if (f.type != LD_H2_DATA && f.type != LD_H2_HEADERS && f.type != LD_H2_RST_STREAM) abort();
    if (f.stream_id == 0 || (f.type != LD_H2_DATA && (f.cls || f.messages))) abort();
  }
}

template <typename T>
bool take(const uint8_t*& p, const uint8_t* end, T& out) {
  if (static_cast<size_t>(end - p) < sizeof(T)) return false;
  std::memcpy(&out, p, sizeof(T));
  p += sizeof(T);
  return true;
}

void build_timeline(const uint8_t* data, size_t size) {
  ld::analysis::SocketTimelineBuilder builder;
  const uint8_t *p = data, *end = data + size;
  uint8_t kind = 0;
  while (take(p, end, kind)) {
    if (kind % 3 == 0) {
      ld_sock_io io{};
      if (!take(p, end, io)) break;
      builder.add(io);
    } else if (kind % 3 == 1) {
      ld_h2_frames h2{};
      if (!take(p, end, h2)) break;
      builder.add(h2);
    } else {
      ld_sock_close c{};
      if (!take(p, end, c)) break;
      builder.add(c);
    }
  }
  const ld::model::Timeline t = builder.finish();
  for (const auto& r : t.requests) g_sink = g_sink + r.token_ns.size() + r.token_tid.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    classify_payload(data + 1, size - 1);
  } else {
    build_timeline(data + 1, size - 1);
  }
  return 0;
}
