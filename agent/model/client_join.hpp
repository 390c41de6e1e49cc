// Client and server side by side: a client's token log (from `bench --tokens-out` or any client
// that writes the contract's format) joined per request to the requests the server's sends
// show. What the client waits for beyond the server's own time is outside the server: before
// the server read the request (connect, a proxy, the listen backlog) or after it sent a token
// (the network, a proxy that buffers). Filled by analysis (client_join.hpp), read by the
// renderers and the rules (facts client.*).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/stats.hpp"

namespace ld::model {

struct JoinedRequest {
  std::string client_id;         // the token log's request id (bench: req-N)
  std::string server_id;         // RequestRow::id of the server's request
  bool new_connection = false;   // the server's first request on its connection
  double client_ttft_ms = 0;     // client: request sent -> first token received
  double server_ttft_ms = 0;     // server: request read -> first token sent
  double before_server_ms = 0;   // client start -> the server read the request
  double after_server_ms = 0;    // the server sent the first token -> the client had it
  double client_e2e_ms = 0;      // client start -> last token received
  double server_e2e_ms = 0;      // server start -> last token sent
  uint64_t client_tokens = 0;    // SSE data events received
  uint64_t server_tokens = 0;    // SSE data events sent
  double client_gap_p50_ms = 0;  // the client's gaps between tokens (NaN with < 2 tokens)
  double server_gap_p50_ms = 0;
  double client_gap_max_ms = 0;
  double server_gap_max_ms = 0;
  double lag_p50_ms = 0;  // per token: received - sent (the n-th token of each side)
  double lag_max_ms = 0;
  uint64_t bunched_tokens = 0;  // tokens the server sent apart that arrived together
};

struct ClientJoin {
  bool present = false;          // a token log was joined to a server timeline
  std::string source;            // "jsonl:FILE"
  std::string method;            // "client_port" (the log's local_port = the server's peer port) or "time"
  uint64_t client_requests = 0;  // streaming requests in the log
  uint64_t server_requests = 0;  // streaming requests in the server's sends
  uint64_t matched = 0;
  // Over the matched requests (ms).
  Distribution client_ttft_ms, server_ttft_ms;
  Distribution before_server_ms, after_server_ms;
  Distribution outside_ttft_ms;               // client TTFT - server TTFT = before + after
  double outside_ttft_share = 0;              // median over requests of outside / client TTFT (NaN: none)
  Distribution client_gap_ms, server_gap_ms;  // every gap between tokens, first token excluded
  Distribution lag_ms;                        // every token: received - sent
  Distribution held_lag_ms;                   // the tokens whose send Nagle's algorithm held (model::held_by_nagle)
  Distribution other_lag_ms;                  // the other tokens whose send's TCP state was read
  uint64_t gaps = 0;                          // client tokens after the first (where bunching is judged)
  uint64_t bunched_tokens = 0;                // arrived < 1 ms after the previous one, sent >= 5 ms after it
  double bunched_share = 0;                   // bunched_tokens / gaps
  std::vector<JoinedRequest> requests;        // by client start
};

// A token counts as bunched when it arrived within this of the previous token although the
// server sent it at least kBunchedSentApartMs after it: held back and released together.
inline constexpr double kBunchedArrivalMs = 1.0;
inline constexpr double kBunchedSentApartMs = 5.0;

}  // namespace ld::model
