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

struct ld_sock_io;
struct ld_sock_close;
struct ld_task_exit;

namespace ld::analysis {

struct Request {
  std::string id;                  // "<tgid>:c<conn>#<n>" for socket timelines (n-th request of
                                   // the tgid's conn-th served connection), the log's id otherwise
  uint32_t tgid = 0;
  uint64_t start_ns = 0;           // first receive of the request's bytes (or the log's start)
  uint64_t end_ns = 0;             // last byte of the response sent (or the log's end); 0 = unknown
  uint64_t input_bytes = 0;        // bytes received for this request (socket timelines)
  int64_t input_tokens = -1;       // from a token log's start event, -1 = unknown
  std::vector<uint64_t> token_ns;  // one per token emission, ascending
  std::vector<uint32_t> token_tid; // thread that emitted each token (0 = unknown)
  bool complete = false;           // the end of the response was seen
  uint32_t index_on_connection = 0; // 1 = the first request of its connection (socket timelines)

  double ttft_ms() const;                    // first token - start; NaN without tokens
  std::vector<double> gaps_ms() const;       // TPOT gaps, first token excluded
};

struct Timeline {
  std::vector<Request> requests;       // streaming requests (>= 1 token), by start time
  uint64_t non_streaming_requests = 0; // requests answered without any SSE data event
  uint64_t partial_requests = 0;       // tokens seen on a connection whose request began before the trace
  uint64_t in_flight_requests = 0;     // requests with no token and no answer yet when the trace ended
  uint64_t connections = 0;            // served connections seen
  uint64_t client_connections = 0;     // connections where the target was the HTTP client (ignored)
  uint64_t multi_event_sends = 0;      // token sends that carried more than one SSE "data:" event
                                       // (still counted as one token: the times are not separable)
  std::map<std::string, uint64_t> send_syscalls;  // "write" -> count of token sends (diagnostics)
};

// Builds requests from socket events. Rules (see docs/architecture.md, "Token timeline"):
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
// Events may come in any order within a small reordering window (per-CPU ring buffer records
// can interleave); the builder buffers everything and sorts by ts_ns per socket in finish().
class SocketTimelineBuilder {
 public:
  void add(const ld_sock_io& ev);
  void add(const ld_sock_close& ev);
  void add(const ld_task_exit& ev);
  Timeline finish();  // call once

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
