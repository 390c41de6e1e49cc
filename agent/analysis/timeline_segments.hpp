// What the socket timeline builder (timeline.cpp) and its HTTP/2 machine (timeline_h2.cpp)
// share: the buffered events and a connection's results. Internal to the two.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "events.h"
#include "model/timeline.hpp"

namespace ld::analysis::timeline_detail {

// One buffered event, reduced to what the state machine reads (32 bytes instead of 64: a long
// trace holds millions of these until finish()).
enum class ItemKind : uint8_t { kIo, kClose, kProcessExit, kH2Frame };

// An HTTP/2 frame entry (kH2Frame) reuses the fields: ret = stream id, syscall = frame type (or
// kH2Preface), cls = the DATA payload's class, sse_events = messages, h2 = flags << 24 | length.
inline constexpr uint8_t kH2Preface = 0xFE;

struct Item {
  uint64_t ts = 0;
  int64_t ret = 0;
  uint32_t tid = 0;
  ItemKind kind = ItemKind::kIo;
  uint8_t dir = 0;
  uint8_t syscall = 0;
  uint8_t cls = 0;
  uint8_t sse_events = 0;
  uint8_t tcp = 0;     // kIo sends: model::TcpSendBits
  uint16_t rport = 0;  // the peer's port: on a served connection, the client's
  uint32_t h2 = 0;     // kH2Frame: flags << 24 | payload length (saturated)
};
static_assert(sizeof(Item) == 32, "Item is buffered by the million: keep it 32 bytes");

using SocketKey = std::pair<uint32_t, uint64_t>;  // (tgid, sock_id)

// A final usage event (llama.cpp, vLLM with include_usage) is LD_PC_SSE_META when the kernel's
// classifier recognises it ("choices":[] within the bytes it reads), and then is not a token.
// Known limitation: when it is not recognised (a longer prefix, another JSON layout) it is
// classified LD_PC_SSE_DATA and counts as one more token: one short TPOT gap at the end of each
// response, and the response's token count is one too high.
inline bool is_token_class(uint8_t cls) { return cls == LD_PC_SSE_DATA || cls == LD_PC_HTTP_RESPONSE_SSE; }
inline bool is_status_line_class(uint8_t cls) { return cls == LD_PC_HTTP_RESPONSE || cls == LD_PC_HTTP_RESPONSE_SSE; }
inline bool is_end_marker_class(uint8_t cls) { return cls == LD_PC_SSE_DONE || cls == LD_PC_CHUNK_END; }
// An HTTP/2 DATA frame's payload that is a token: a gRPC message or an SSE data event.
inline bool is_h2_token_class(uint8_t cls) { return cls == LD_PC_GRPC_MESSAGE || cls == LD_PC_SSE_DATA; }

// ld_sock_io's TCP state as model::TcpSendBits (the kernel's bits are the same, but for model::kTcpHeld).
inline uint8_t tcp_bits(const ld_sock_io& ev) {
  if (!(ev.tcp & LD_TCP_READ)) return 0;
  return static_cast<uint8_t>((ev.tcp & (LD_TCP_READ | LD_TCP_NODELAY | LD_TCP_CORK)) |
                              (ev.unsent > 0 ? model::kTcpHeld : 0));
}
static_assert(int{LD_TCP_READ} == int{model::kTcpRead} && int{LD_TCP_NODELAY} == int{model::kTcpNodelay} &&
              int{LD_TCP_CORK} == int{model::kTcpCork});

// Why a request or a connection stopped being followed.
enum class EndReason {
  kNextResponse,  // a later request on the same connection took over (keep-alive)
  kClose,         // the target closed the socket
  kPeerEof,       // the peer closed (recv returned 0)
  kProcessExit,   // the target process exited
  kTraceEnd,      // the trace ended first
};

// A connection is a run of events on one socket between closes: what one accept() served.
struct Segment {
  uint32_t tgid = 0;
  uint64_t sock_id = 0;
  uint64_t first_ts = 0;
  std::vector<Item> ios;  // kIo items with ret > 0, in time order
  EndReason end = EndReason::kTraceEnd;
};

struct Numbered {
  uint64_t n = 0;  // n-th request on its connection, from 1
  model::Request request;
};

struct SegmentResult {
  uint32_t tgid = 0;
  uint64_t sock_id = 0;
  uint64_t first_ts = 0;
  bool served = false;
  bool client = false;
  std::vector<Numbered> requests;
  uint64_t non_streaming = 0;
  uint64_t partial = 0;
  uint64_t in_flight = 0;
  uint64_t multi_event_sends = 0;
  std::array<uint64_t, 256> send_syscalls{};  // by ld_sock_io.syscall: named once, at the end
};

// An empty result naming the connection.
inline SegmentResult result_for(const Segment& seg) {
  SegmentResult r;
  r.tgid = seg.tgid;
  r.sock_id = seg.sock_id;
  r.first_ts = seg.first_ts;
  return r;
}

// Runs one HTTP/2 connection (a segment with frames in it): each stream is a request.
bool is_h2_segment(const Segment& seg);
SegmentResult run_h2_segment(const Segment& seg);

}  // namespace ld::analysis::timeline_detail
