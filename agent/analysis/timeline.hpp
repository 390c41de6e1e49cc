// Token timeline: requests, their first token and the gaps between tokens.
//
// Pure analysis: built from event records (bpf/events.h) or from a token log; knows nothing of
// libbpf. All times are CLOCK_MONOTONIC nanoseconds (the BPF clock).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/timeline.hpp"

struct ld_sock_io;
struct ld_h2_frames;
struct ld_sock_close;
struct ld_task_exit;

namespace ld::analysis {

// Builds requests from socket events. Rules (see docs/probes.md, "The token timeline (sock)"):
//  - a connection is *served* once it receives an HTTP request line or sends an HTTP status
//    line or an SSE event; connections where the target is the client (sends request lines or
//    receives status lines) are ignored;
//  - a request starts at the receive of a request line (or, on a served connection, at the
//    first receive after the previous response ended or streamed tokens); later receives before
//    the response are its body (input_bytes);
//  - tokens are sends classified LD_PC_SSE_DATA / LD_PC_HTTP_RESPONSE_SSE (one per send; the
//    "[DONE]" marker, SSE comments and chunk framing are not tokens);
//  - a response ends at "[DONE]", the chunked terminator, a close, or the next request.
//    A close by the target counts as a complete response; the peer's EOF (recv returning 0)
//    and the process exiting leave a response without an end marker incomplete;
//  - a close (or EOF) ends the connection: a reused socket id starts a new connection.
// HTTP/2 connections (sends and receives classified LD_PC_H2, their frames in ld_h2_frames) are
// multiplexed: each stream is a request. It starts at the receive of its HEADERS, its tokens are
// sent DATA frames that carry gRPC messages or SSE data events, and it ends at END_STREAM (on
// DATA or trailing HEADERS) or a RST_STREAM either way. The target is the client on a connection
// where it sent the preface or opened a stream itself.
// Events may come in any order within a small reordering window (per-CPU ring buffer records
// can interleave); the builder buffers everything and sorts by ts_ns per socket in finish().
class SocketTimelineBuilder {
 public:
  void add(const ld_sock_io& ev);
  void add(const ld_h2_frames& ev);
  void add(const ld_sock_close& ev);
  void add(const ld_task_exit& ev);
  model::Timeline finish();  // call once

  SocketTimelineBuilder();
  ~SocketTimelineBuilder();
  SocketTimelineBuilder(const SocketTimelineBuilder&) = delete;
  SocketTimelineBuilder& operator=(const SocketTimelineBuilder&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "write", "sendto", ... for enum ld_io_syscall; "syscall#N" for values this build does not know.
std::string io_syscall_name(unsigned syscall);

}  // namespace ld::analysis
