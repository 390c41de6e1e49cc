// The token timeline as data: requests, their first token and the gaps between tokens.
// All times are CLOCK_MONOTONIC nanoseconds (the BPF clock). Filled by analysis (socket
// records) or by a token log (tokens/); read by the report and the rules.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ld::model {

// A token send's TCP state, from the sock probe (bpf/events.h, ld_sock_io.tcp and .unsent).
enum TcpSendBits : uint8_t {
  kTcpRead = 1,     // the state was read: a send on a TCP socket
  kTcpNodelay = 2,  // TCP_NODELAY: Nagle's algorithm off
  kTcpCork = 4,     // TCP_CORK
  kTcpHeld = 8,     // bytes were still queued, unsent, when the send returned
};
// Nagle's algorithm was on for a send: neither TCP_NODELAY nor a cork (a cork holds on purpose).
inline bool nagle_on(uint8_t tcp) { return (tcp & kTcpRead) && !(tcp & (kTcpNodelay | kTcpCork)); }
// ... and the send returned with its bytes queued: they wait for the peer's ACK.
inline bool held_by_nagle(uint8_t tcp) { return nagle_on(tcp) && (tcp & kTcpHeld); }

struct Request {
  std::string id;  // "<tgid>:c<conn>#<n>" for socket timelines (n-th request of
                   // the tgid's conn-th served connection), the log's id otherwise
  uint32_t tgid = 0;
  uint64_t start_ns = 0;               // first receive of the request's bytes (or the log's start)
  uint64_t end_ns = 0;                 // last byte of the response sent (or the log's end); 0 = unknown
  uint64_t input_bytes = 0;            // bytes received for this request (socket timelines)
  int64_t input_tokens = -1;           // from a token log's start event, -1 = unknown
  std::vector<uint64_t> token_ns;      // one per token emission, ascending
  std::vector<uint32_t> token_tid;     // thread that emitted each token (0 = unknown)
  bool complete = false;               // the end of the response was seen
  uint32_t index_on_connection = 0;    // 1 = the first request of its connection (socket timelines)
  uint16_t client_port = 0;            // the client's TCP port: the served connection's peer port
                                       // (socket timelines) or the log's "local_port"; 0 = unknown
  std::vector<uint16_t> token_events;  // SSE data events in each token send; empty = one each
                                       // (socket timelines only: a log has one line per token)
  std::vector<uint8_t> token_tcp;      // TcpSendBits of each token's send; empty = not known (token
                                       // logs, traces from before the sock probe read them)

  double ttft_ms() const;               // first token - start; NaN without tokens
  std::vector<double> gaps_ms() const;  // TPOT gaps, first token excluded
};

struct Timeline {
  std::vector<Request> requests;                  // streaming requests (>= 1 token), by start time
  uint64_t non_streaming_requests = 0;            // requests answered without any SSE data event
  uint64_t partial_requests = 0;                  // tokens seen on a connection whose request began before the trace
  uint64_t in_flight_requests = 0;                // requests with no token and no answer yet when the trace ended
  uint64_t connections = 0;                       // served connections seen
  uint64_t client_connections = 0;                // connections where the target was the HTTP client (ignored)
  uint64_t multi_event_sends = 0;                 // token sends that carried more than one SSE "data:" event
                                                  // (still counted as one token: the times are not separable)
  uint64_t h2_unseen_frames = 0;                  // HTTP/2 sends/receives with frames past the bytes the kernel
                                                  // reads (512): their tokens may be missing
  std::map<std::string, uint64_t> send_syscalls;  // "write" -> count of token sends (diagnostics)
};

}  // namespace ld::model
